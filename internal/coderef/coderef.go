// Package coderef lists the data addresses a kernel function's machine code
// may refer to, so that a data symbol kallsyms does not hold (a kernel
// built without CONFIG_KALLSYMS_ALL) can be found through the code of a
// function that uses it: /proc/kallsyms' own helpers (bpf_get_kallsym,
// kprobe_get_kallsym, ftrace_mod_get_kallsym) name the list heads they walk.
//
// The lists are deliberately generous: every encoding that can carry an
// address is decoded at every position where an instruction could start,
// so the result is a superset of the real references, with false ones
// among them. A caller must accept a candidate only after validating what
// it points to against independent evidence (a list whose links agree in
// both directions, a struct that names itself), and must treat two
// candidates that both validate as an ambiguity.
//
// What is decoded, per architecture:
//
//   - x86_64 (-mcmodel=kernel): sign-extended 32-bit absolute immediates
//     and displacements (mov $sym, cmp $sym, mov sym(,%reg)) at every byte
//     offset, and RIP-relative displacements at every byte offset, taken
//     relative to the end of the instruction with no, an 8-bit, a 16-bit
//     or a 32-bit immediate after it.
//   - i386 (non-PIC): 32-bit absolute immediates and displacements at every
//     byte offset.
//   - arm64: ADRP with the ADD (immediate), LDR/STR (unsigned offset) and
//     LDP/STP that follow on the same register, including the chains GCC's
//     section anchors make (adrp; add anchor; add/ldr #offset).
//   - arm (32-bit): every aligned 32-bit word, as i386 (ARM-mode code
//     loads a global's address from a literal pool placed after the
//     function, inside its extent); in ARM mode, the addresses computed
//     from registers set by MOVW/MOVT pairs or literal loads (ADD/SUB
//     immediate, loads and stores with an immediate offset: GCC's section
//     anchors); in Thumb-2 (CONFIG_THUMB2_KERNEL), MOVW/MOVT pairs at
//     every halfword.
//   - s390x: the relative-long instructions of the RIL-b format (LARL, the
//     0xC4 load/store relative long and 0xC6 compare relative long
//     families) at every halfword.
//   - ppc64le and ppc64 (ELFv2/ELFv1, -mcmodel=medium): ADDIS and ADDI
//     chains from registers of known value, and the D- and DS-form loads
//     and stores on them. r12 holds the function's own address at its
//     global entry, whose ADDIS/ADDI pair on r2 makes the kernel's TOC
//     pointer; globals are reached as TOC + ADDIS high + ADDI/load low.
//   - riscv64 (-mcmodel=medany): AUIPC and LUI with the ADDI, loads and
//     stores (compressed ones too) that follow on the same register,
//     decoding the instruction stream from the function's start (2- and
//     4-byte instructions, told apart by their low bits).
//
// # Security
//
// Pure computation over the bytes it is given: bounded by len(code), no
// allocation beyond the result.
package coderef

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Supported reports whether Refs decodes code of the architecture (the
// kernel's name, as vmcore.Arch.Name).
func Supported(arch string) bool {
	switch arch {
	case "x86_64", "i386", "arm", "arm64", "s390x", "ppc64le", "ppc64", "riscv64":
		return true
	}
	return false
}

// Refs returns, sorted and without duplicates, the addresses the code at pc
// may refer to (see the package doc for what is decoded). An architecture
// Refs does not decode is an error wrapping errors.ErrUnsupported.
func Refs(arch string, pc uint64, code []byte) ([]uint64, error) {
	var out []uint64
	switch arch {
	case "x86_64":
		out = x86_64(pc, code)
	case "i386":
		out = i386(code)
	case "arm":
		out = arm(pc, code)
	case "arm64":
		out = arm64(pc, code)
	case "s390x":
		out = s390x(pc, code)
	case "ppc64le":
		out = ppc64(pc, code, binary.LittleEndian)
	case "ppc64":
		out = ppc64(pc, code, binary.BigEndian)
	case "riscv64":
		out = riscv64(pc, code)
	default:
		return nil, fmt.Errorf("coderef: code of %q: %w", arch, errors.ErrUnsupported)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func x86_64(pc uint64, code []byte) []uint64 {
	var out []uint64
	for i := 0; i+4 <= len(code); i++ {
		d := int64(int32(binary.LittleEndian.Uint32(code[i:])))
		out = append(out, uint64(d))
		end := pc + uint64(i) + 4
		for _, imm := range [...]uint64{0, 1, 2, 4} {
			out = append(out, end+imm+uint64(d))
		}
	}
	return out
}

func i386(code []byte) []uint64 {
	var out []uint64
	for i := 0; i+4 <= len(code); i++ {
		out = append(out, uint64(binary.LittleEndian.Uint32(code[i:])))
	}
	return out
}

// arm yields the aligned words of code (literal pools) and the addresses
// computed from registers whose values are known, in ARM mode: a MOVW/MOVT
// pair, or a load from the literal pool, sets a register; MOV copies it;
// ADD and SUB (immediate) and the loads and stores with an immediate
// offset compute from it, the way GCC reaches a variable through a section
// anchor (movw/movt r6, anchor; ldr r4, [r6, #off]). A register stays
// known until an instruction that may write it. In Thumb-2 (a kernel built
// with CONFIG_THUMB2_KERNEL) only MOVW/MOVT pairs are followed, at every
// halfword.
func arm(pc uint64, code []byte) []uint64 {
	var out []uint64
	start := int(-pc & 3) // the first word-aligned byte
	var val [16]uint32
	var known [16]bool
	forget := func(r uint32) { known[r&15] = false }
	for i := start; i+4 <= len(code); i += 4 {
		w := binary.LittleEndian.Uint32(code[i:])
		out = append(out, uint64(w))
		if w>>28 == 0xf { // unconditional space: nothing followed
			continue
		}
		rn, rd := w>>16&0xf, w>>12&0xf
		imm16 := w>>4&0xf000 | w&0xfff
		up := w&(1<<23) != 0
		switch {
		case w&0x0ff00000 == 0x03000000: // MOVW Rd, #imm16 (A2)
			val[rd], known[rd] = imm16, true
		case w&0x0ff00000 == 0x03400000: // MOVT Rd, #imm16 (A1)
			if known[rd] {
				val[rd] = imm16<<16 | val[rd]&0xffff
				out = append(out, uint64(val[rd]))
			}
		case w&0x0fef0ff0 == 0x01a00000: // MOV Rd, Rm
			val[rd], known[rd] = val[w&0xf], known[w&0xf]
		case w&0x0f7f0000 == 0x051f0000: // LDR Rt, [PC, #±imm12]
			off := int64(i) + 8 + armOff(w&0xfff, up)
			known[rd] = false
			if off >= 0 && off%4 == 0 && off+4 <= int64(len(code)) {
				val[rd], known[rd] = binary.LittleEndian.Uint32(code[off:]), true
			}
		case w&0x0fc00000 == 0x02800000 || w&0x0fc00000 == 0x02400000: // ADD/SUB Rd, Rn, #imm
			rot := w >> 8 & 0xf * 2
			imm := w&0xff>>rot | w&0xff<<(32-rot)&0xffffffff
			if rot == 0 {
				imm = w & 0xff
			}
			if !known[rn] || rn == 15 {
				forget(rd)
				continue
			}
			v := val[rn] + imm
			if w&0x0fc00000 == 0x02400000 {
				v = val[rn] - imm
			}
			out = append(out, uint64(v))
			val[rd], known[rd] = v, true
		case w&0x0e000000 == 0x04000000: // LDR/STR(B) Rt, [Rn, #±imm12]{!}, post-indexed
			arm32Access(&out, &val, &known, w, armOff(w&0xfff, up))
		case w&0x0e400090 == 0x00400090 && w&0x60 != 0: // LDRH/STRH/LDRD/STRD/LDRS[BH] immediate
			arm32Access(&out, &val, &known, w, armOff(w>>4&0xf0|w&0xf, up))
			forget(rd + 1) // LDRD writes a pair
		case w&0x0f000000 == 0x0b000000 || w&0x0ffffff0 == 0x012fff30: // BL, BLX Rm: the callee's registers
			for _, r := range []uint32{0, 1, 2, 3, 12, 14} {
				forget(r)
			}
		case w&0x0e100000 == 0x08100000: // LDM: every listed register
			for r := uint32(0); r < 16; r++ {
				if w&(1<<r) != 0 {
					forget(r)
				}
			}
		case w&0x0c000000 == 0x00000000: // other data processing writes Rd
			forget(rd)
		}
	}
	// Thumb-2: a 32-bit instruction is two little-endian halfwords.
	clear(known[:])
	for i := int(pc & 1); i+4 <= len(code); i += 2 {
		h1 := uint32(binary.LittleEndian.Uint16(code[i:]))
		h2 := uint32(binary.LittleEndian.Uint16(code[i+2:]))
		if h2&0x8000 != 0 {
			continue
		}
		imm := h1&0xf<<12 | h1>>10&1<<11 | h2>>12&7<<8 | h2&0xff
		rd := h2 >> 8 & 0xf
		switch h1 & 0xfbf0 {
		case 0xf240: // MOVW Rd, #imm16 (T3)
			val[rd], known[rd] = imm, true
		case 0xf2c0: // MOVT Rd, #imm16 (T1)
			if known[rd] {
				out = append(out, uint64(imm<<16|val[rd]&0xffff))
			}
		}
	}
	return out
}

// armOff is an ARM load/store offset: imm added (U set) or subtracted.
func armOff(imm uint32, up bool) int64 {
	if up {
		return int64(imm)
	}
	return -int64(imm)
}

// arm32Access records the address an ARM load or store with an immediate
// offset reaches from a known base (P set: base+off, with writeback if W;
// P clear: the base, then base+off written back), and forgets the register
// a load writes.
func arm32Access(out *[]uint64, val *[16]uint32, known *[16]bool, w uint32, off int64) {
	rn, rt := w>>16&0xf, w>>12&0xf
	pre, wb, load := w&(1<<24) != 0, w&(1<<21) != 0, w&(1<<20) != 0
	if known[rn] && rn != 15 {
		next := val[rn] + uint32(off)
		if pre {
			*out = append(*out, uint64(next))
		} else {
			*out = append(*out, uint64(val[rn]))
		}
		if wb || !pre {
			val[rn] = next
		}
	} else if wb || !pre {
		known[rn] = false
	}
	if load {
		known[rt] = false
	}
}

// arm64 follows the values ADRP puts in registers through the ADD
// (immediate) instructions after it, and yields every address an ADD, a
// load or a store computes from a register so known. A register stays
// known until an ADRP or ADD writes it again or a load writes it.
func arm64(pc uint64, code []byte) []uint64 {
	var out []uint64
	var val [32]uint64
	var known [32]bool
	pc &^= 3
	for i := 0; i+4 <= len(code); i += 4 {
		w := binary.LittleEndian.Uint32(code[i:])
		at := pc + uint64(i)
		rd, rn := w&31, w>>5&31
		switch {
		case w&0x9f000000 == 0x90000000: // ADRP
			imm := int64(w>>29&3|(w>>5&0x7ffff)<<2) << 43 >> 31 // sign-extend 21 bits, then << 12
			page := at&^0xfff + uint64(imm)
			val[rd], known[rd] = page, true
			out = append(out, page)
		case w&0xff800000 == 0x91000000: // ADD (immediate), 64-bit
			if !known[rn] || rn == 31 {
				known[rd] = false
				continue
			}
			imm := uint64(w >> 10 & 0xfff)
			if w&(1<<22) != 0 {
				imm <<= 12
			}
			v := val[rn] + imm
			out = append(out, v)
			val[rd], known[rd] = v, true
		case w&0x3b000000 == 0x39000000: // LDR/STR (unsigned offset), any size
			size := w >> 30
			if w&(1<<26) != 0 { // SIMD&FP: opc<1> extends the size to 128 bits
				size |= w >> 21 & 4
			}
			if known[rn] && rn != 31 {
				out = append(out, val[rn]+uint64(w>>10&0xfff)<<size)
			}
			if w>>22&3 != 0 && w&(1<<26) == 0 { // a load writes Rt
				known[rd] = false
			}
		case w&0x3a000000 == 0x28000000: // LDP/STP (and no-allocate pairs)
			if known[rn] && rn != 31 {
				scale := 2 + w>>31 // 32- or 64-bit registers
				off := int64(w>>15&0x7f) << 57 >> 57 << scale
				out = append(out, val[rn]+uint64(off))
			}
			if w&(1<<22) != 0 { // a load writes Rt and Rt2
				known[rd], known[w>>10&31] = false, false
			}
		}
	}
	return out
}

// s390x decodes the RIL-b relative-long instructions: the target is the
// instruction's own address plus twice the signed 32-bit immediate.
func s390x(pc uint64, code []byte) []uint64 {
	var out []uint64
	for i := 0; i+6 <= len(code); i += 2 {
		op, op2 := code[i], code[i+1]&0x0f
		if !(op == 0xc0 && op2 == 0 || op == 0xc4 || op == 0xc6) {
			continue
		}
		d := int64(int32(binary.BigEndian.Uint32(code[i+2:])))
		out = append(out, pc+uint64(i)+uint64(2*d))
	}
	return out
}

// ppc64 follows the values ADDIS and ADDI compute from registers of known
// value, r12 being the function's address at pc (its global entry point),
// and yields every address an ADDI, a D-form or a DS-form load or store
// computes from a known register. A register stays known until an ADDIS
// or ADDI on an unknown one, or a load, writes it; but not a load from the
// stack (base r1): the code is read in address order, not in control
// flow order, and an epilogue restoring the non-volatile registers often
// comes before the blocks that go on using the values they held.
func ppc64(pc uint64, code []byte, bo binary.ByteOrder) []uint64 {
	var out []uint64
	var val [32]uint64
	var known [32]bool
	pc &^= 3
	val[12], known[12] = pc, true
	for i := 0; i+4 <= len(code); i += 4 {
		w := bo.Uint32(code[i:])
		op := w >> 26
		rd, ra := w>>21&31, w>>16&31
		simm := uint64(int64(int16(w & 0xffff)))
		switch {
		case op == 15 || op == 14: // addis, addi (rA = 0 means the constant 0)
			if op == 15 {
				simm <<= 16
			}
			if ra == 0 {
				val[rd], known[rd] = simm, true
				continue
			}
			if !known[ra] {
				known[rd] = false
				continue
			}
			v := val[ra] + simm
			if op == 14 {
				out = append(out, v)
			}
			val[rd], known[rd] = v, true
		case op >= 32 && op <= 55: // D-form: lwz .. stfdu
			if ra != 0 && known[ra] {
				out = append(out, val[ra]+simm)
			}
			if (op < 36 || op >= 40 && op < 44 || op == 46) && ra != 1 { // integer loads write rD
				known[rd] = false
			}
			if op&1 == 1 && op <= 47 && ra != 0 { // the update forms write rA
				known[ra] = false
			}
		case op == 58 || op == 62: // DS-form: ld, ldu, lwa; std, stdu
			if ra != 0 && known[ra] {
				out = append(out, val[ra]+simm&^3)
			}
			if op == 58 && ra != 1 {
				known[rd] = false
			}
			if w&3 == 1 && ra != 0 {
				known[ra] = false
			}
		}
	}
	return out
}

// riscv64 follows the values AUIPC and LUI put in registers through the
// ADDI instructions after them, and yields every address an ADDI, a load
// or a store (not AUIPC's own partial value) (RV64I, F/D, and the C extension's register-based forms)
// computes from a register so known. Any other instruction writing a
// register makes it unknown. x0 is never known.
func riscv64(pc uint64, code []byte) []uint64 {
	var out []uint64
	var val [32]uint64
	var known [32]bool
	set := func(rd uint32, v uint64, ok bool) {
		if rd != 0 {
			val[rd], known[rd] = v, ok
		}
	}
	for i := 0; i+2 <= len(code); {
		at := pc + uint64(i)
		h := uint32(binary.LittleEndian.Uint16(code[i:]))
		if h&3 != 3 { // compressed, 16 bits
			i += 2
			rvc(h, &val, &known, &out, set)
			continue
		}
		if i+4 > len(code) {
			break
		}
		w := binary.LittleEndian.Uint32(code[i:])
		i += 4
		rd, rs1 := w>>7&31, w>>15&31
		immI := uint64(int64(int32(w)) >> 20)
		immS := uint64(int64(int32(w&0xfe000000))>>20 | int64(w>>7&31))
		switch w & 0x7f {
		case 0x17: // AUIPC: pc + hi20 alone is no address (the low 12 bits
			// come with the ADDI, load or store after it), so only a
			// register value; yielding it made a mutex's wait_list next
			// to ftrace_ops_trampoline_list a second candidate on 6.12.
			set(rd, at+uint64(int64(int32(w&0xfffff000))), true)
		case 0x37: // LUI
			set(rd, uint64(int64(int32(w&0xfffff000))), true)
		case 0x13: // OP-IMM: ADDI follows, the others write rd
			if w>>12&7 == 0 && known[rs1] {
				v := val[rs1] + immI
				out = append(out, v)
				set(rd, v, true)
			} else {
				set(rd, 0, false)
			}
		case 0x03, 0x07: // LOAD, LOAD-FP
			if known[rs1] {
				out = append(out, val[rs1]+immI)
			}
			if w&0x7f == 0x03 {
				set(rd, 0, false)
			}
		case 0x23, 0x27: // STORE, STORE-FP
			if known[rs1] {
				out = append(out, val[rs1]+immS)
			}
		case 0x63, 0x0f, 0x53, 0x43, 0x47, 0x4b, 0x4f: // branches, fences, FP: no integer rd
		default:
			set(rd, 0, false)
		}
	}
	return out
}

// rvc decodes a compressed instruction for riscv64.
func rvc(h uint32, val *[32]uint64, known *[32]bool, out *[]uint64, set func(uint32, uint64, bool)) {
	q, f3 := h&3, h>>13
	rdFull := h >> 7 & 31
	rs1p := h>>7&7 + 8 // rs1' of loads and stores
	rdp := h>>2&7 + 8  // rd' / rs2' of loads and stores
	switch q {
	case 0:
		var off uint64
		switch f3 {
		case 2, 6: // C.LW, C.SW (also C.FLW on RV32 only)
			off = uint64(h>>10&7)<<3 | uint64(h>>6&1)<<2 | uint64(h>>5&1)<<6
		case 1, 3, 5, 7: // C.FLD, C.LD, C.FSD, C.SD
			off = uint64(h>>10&7)<<3 | uint64(h>>5&3)<<6
		default: // C.ADDI4SPN
			set(rdp, 0, false)
			return
		}
		if known[rs1p] {
			*out = append(*out, val[rs1p]+off)
		}
		if f3 == 2 || f3 == 3 {
			set(rdp, 0, false)
		}
	case 1:
		switch f3 {
		case 0: // C.ADDI
			imm := uint64(int64(int32(h>>12&1<<31|(h>>2&31)<<26)) >> 26)
			if known[rdFull] {
				v := val[rdFull] + imm
				*out = append(*out, v)
				set(rdFull, v, true)
			}
		case 1, 2, 3: // C.ADDIW, C.LI, C.LUI/C.ADDI16SP
			set(rdFull, 0, false)
		case 4: // C.SRLI, C.SRAI, C.ANDI, C.SUB ...: rd'
			set(rs1p, 0, false)
		}
	case 2:
		switch f3 {
		case 0, 2, 3: // C.SLLI, C.LWSP, C.LDSP
			set(rdFull, 0, false)
		case 4:
			rs2 := h >> 2 & 31
			switch {
			case h>>12&1 == 0 && rs2 != 0: // C.MV
				set(rdFull, val[rs2], known[rs2])
			case h>>12&1 == 1 && rs2 != 0: // C.ADD
				set(rdFull, 0, false)
			case h>>12&1 == 1 && rdFull != 0: // C.JALR writes ra
				set(1, 0, false)
			}
		}
	}
}
