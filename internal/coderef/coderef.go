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
//   - s390x: the relative-long instructions of the RIL-b format (LARL, the
//     0xC4 load/store relative long and 0xC6 compare relative long
//     families) at every halfword.
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
	case "x86_64", "i386", "arm64", "s390x", "riscv64":
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
	case "arm64":
		out = arm64(pc, code)
	case "s390x":
		out = s390x(pc, code)
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
