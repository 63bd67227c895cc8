package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// 32-bit ARM kernels built with CONFIG_ARM_UNWIND (Debian's armmp, which
// keep no frame pointers) carry the ARM EHABI unwind tables ("Exception
// Handling ABI for the ARM Architecture", §§ 6–10), which the kernel's own
// unwinder reads (arch/arm/kernel/unwind.c, unwind_frame; 6.1, 6.12, 7.2):
//
//   - the index, .ARM.exidx (vmlinux: __start_unwind_idx to
//     __stop_unwind_idx), is a table of 8-byte entries sorted by function
//     address: a prel31 offset (bit 31 clear, bits 30–0 a signed offset
//     from the word's own address) to the function's first instruction,
//     then either 1 (EXIDX_CANTUNWIND: the entry code, where the kernel's
//     stack ends), a word with bit 31 set holding the function's compact
//     model inline (0x80 then three opcode bytes: personality routine 0),
//     or a prel31 offset to its entry in .ARM.extab;
//   - an .ARM.extab entry starts with a word 0x80 (routine 0: three
//     opcode bytes), 0x81 or 0x82 (routines 1 and 2: a count N in bits
//     23–16, two opcode bytes, then N more words of four), most
//     significant byte first; a word with bit 31 clear names a generic
//     personality routine, which kernel code never has;
//   - the opcodes undo the function's prologue on a virtual stack pointer
//     vsp: 00xxxxxx vsp += 4x+4; 01xxxxxx vsp -= 4x+4; 1000iiii iiiiiiii
//     pop the registers r4–r15 of the 12-bit mask (r4 lowest; mask 0 is
//     "refuse to unwind"; a popped r13 becomes vsp); 1001nnnn vsp = rn
//     (n 13 and 15 reserved); 10100nnn pop r4–r(4+n), 10101nnn also r14;
//     10110000 finish; 10110001 0000iiii pop r0–r3 of the mask;
//     10110010 uleb128 vsp += 0x204 + 4·uleb128; the VFP pops (10110011
//     sssscccc, 10111nnn, 11001000/11001001 sssscccc, 11010nnn) move vsp
//     past the saved doubles (kernel code saves none; the kernel's
//     unwinder rejects them). The caller's pc is a popped r15, else r14.
//
// The kernel starts a walk at the function's entry ("frame->pc ==
// prel31_to_addr(&idx->addr_offset)": nothing is pushed yet, pc = lr) and
// looks every later frame up at its return address. A call to a noreturn
// function (panic) can be a function's last instruction, so its return
// address is the next function's first: the kernel then takes that
// function's entry rule and ends the trace (the console of the corpus's
// armhf guests shows "panic from sysrq_reset_seq_param_set+0x0/0x90").
// ARM looks a return address up one byte before it, inside the call,
// where it is the caller's; a pc that is not a return address (the saved
// pc of an exception frame, popped as r15 from the pt_regs that the entry
// code's ".save {r0 - pc}" describes, or the first frame's) is looked up
// where it is. Each module's text has its own index (module_finalize's
// unwind_table_add; the kernel's unwind_tables list).

// ARMIndex is one EHABI index table: [Start, Stop) holds its 8-byte
// entries; a module's covers its text [TextStart, TextEnd).
type ARMIndex struct {
	Name               string // the module's; "" for vmlinux
	Start, Stop        uint64
	TextStart, TextEnd uint64
}

// ARMTables are the unwind tables of a 32-bit ARM kernel: vmlinux's and
// the modules'.
type ARMTables struct {
	Vmlinux ARMIndex
	// Modules are the modules' tables; ModulesErr says why they are
	// absent (reported when a frame is in no table).
	Modules    []ARMIndex
	ModulesErr error
	// LoadModules, when set and Modules and ModulesErr are not, gives them
	// on first need: a walk that stays in vmlinux never reads them.
	LoadModules func() ([]ARMIndex, error)
	// InVmlinux, when set, says whether an address is vmlinux's text
	// (the kernel's core_kernel_text): others are looked up in the
	// modules' tables only.
	InVmlinux func(addr uint64) bool
}

// ARM registers in PRSTATUS (r0–r15, cpsr) and struct pt_regs.
const (
	armSP      = 13
	armLR      = 14
	armPC      = 15
	armCPSR    = 16
	armModeUSR = 0x10
	armModeSVC = 0x13
	armModeIRQ = 0x12
	// The exception vectors: at 0 or, with SCTLR.V (Linux's), at
	// 0xffff0000; the IRQ vector is the seventh word.
	armVectorsHigh = 0xffff0000
	armVectorIRQ   = 0x18
)

// maxARMEntries bounds an index: Debian's armmp vmlinux has about 45,000
// entries (one per function); 2^21 (16 MiB of index) leaves room for any.
const maxARMEntries = 1 << 21

// armModes names the processor modes of CPSR's low five bits.
var armModes = map[uint64]string{0x10: "user", 0x11: "FIQ", 0x12: "IRQ", 0x13: "supervisor", 0x16: "monitor",
	0x17: "abort", 0x1a: "hypervisor", 0x1b: "undefined", 0x1f: "system"}

// ErrARMUnwind means an unwind table cannot unwind a frame: no index entry
// covers its pc, the entry refuses, or its opcodes are ones the kernel
// never has.
var ErrARMUnwind = errors.New("unwind: no ARM unwind entry")

// ErrBankedSP means the CPU was in an exception mode whose entry saved
// nothing yet: the interrupted code's stack pointer is a banked register
// the dump's note does not hold (QEMU stops a 32-bit ARM CPU at the IRQ
// vector when an interrupt is pending as it stops the guest).
var ErrBankedSP = errors.New("unwind: the supervisor-mode stack pointer is not in the dump")

// ARM walks a 32-bit ARM kernel stack from regs (PRSTATUS: r0–r15, cpsr)
// with the kernel's EHABI unwind tables t. It returns the frames, the
// first being pc, and why the walk stopped: a function marked
// EXIDX_CANTUNWIND (the entry code: the end of the kernel stack), a pc no
// table covers or an entry the unwinder refuses (ErrARMUnwind), unreadable
// memory (*memory.FaultError), a stack pointer that goes back down its
// stack or changes stack more than MaxStacks times (ErrBadFrame). Work is
// bounded: a binary search a frame, at most 1,023 opcodes a frame,
// MaxFrames frames. Options.Target must be known.
func ARM(kmem memory.Reader, regs []uint64, t ARMTables, opt Options) ([]Frame, Stop) {
	if err := opt.Target.Check(); err != nil {
		return nil, Stop{Err: fmt.Errorf("unwind: %w", err)}
	}
	if len(regs) < 16 {
		return nil, Stop{Err: fmt.Errorf("unwind: arm: %d registers, want r0–r15: %w", len(regs), ErrBadFrame)}
	}
	opt.setLimits()
	if opt.StackSize&(opt.StackSize-1) != 0 {
		return nil, Stop{Err: fmt.Errorf("unwind: stack size %d: %w", opt.StackSize, errors.ErrUnsupported)}
	}
	w := armWalker{kmem: kmem, t: t, bo: opt.Target.ByteOrder}
	var r [16]uint32
	for i := range r {
		r[i] = uint32(regs[i])
	}
	frames := []Frame{{PC: uint64(r[armPC])}}
	if len(regs) > armCPSR {
		mode := regs[armCPSR] & 0x1f
		if mode == armModeUSR {
			return frames, Stop{Final: true, Why: "the CPU was in user mode"}
		}
		if mode == armModeIRQ && (r[armPC] == armVectorsHigh+armVectorIRQ || r[armPC] == armVectorIRQ) {
			// At the IRQ vector's first instruction: the CPU took the
			// exception and ran nothing of it. LR_irq is the interrupted
			// instruction + 4 (ARM ARM, "IRQ exception"); r0–r12 are the
			// interrupted code's, but its sp and lr are the supervisor
			// mode's banked registers, which PRSTATUS does not hold.
			frames = append(frames, Frame{PC: uint64(r[armLR] - 4)})
			return frames, Stop{Err: fmt.Errorf("the CPU was entering the IRQ exception (IRQ mode at the vector %#x, cpsr %#x), interrupted at lr - 4 = %#x: %w", r[armPC], regs[armCPSR], r[armLR]-4, ErrBankedSP)}
		}
		if mode != armModeSVC {
			// The banked sp and lr of another mode: an exception being
			// entered, not the kernel's stack.
			if _, _, _, err := w.find(uint64(r[armPC])); err != nil {
				name := armModes[mode]
				if name == "" {
					name = fmt.Sprintf("mode %#x", mode)
				}
				return frames, Stop{Err: fmt.Errorf("%w (the CPU was in %s mode, cpsr %#x: its sp and lr are that mode's own)", err, name, regs[armCPSR])}
			}
		}
	}
	stacks := 0
	retAddr := false // r[armPC] is a return address, not where the CPU was
	for len(frames) < opt.MaxFrames {
		pc, sp := r[armPC], r[armSP]
		at := pc
		if retAddr {
			// Entry code sets lr to a label marked EXIDX_CANTUNWIND
			// (vector_swi's "badr lr, ret_fast_syscall"): not a call's
			// return address but where the kernel's stack ends.
			if fn, _, insn, err := w.find(uint64(pc)); err == nil && fn == uint64(pc) && insn == 1 {
				return frames, Stop{Final: true, Why: fmt.Sprintf("%#x is entry code, marked EXIDX_CANTUNWIND", fn)}
			}
			at = pc - 1
		}
		fn, ia, insn, err := w.find(uint64(at))
		if err != nil {
			return frames, Stop{Err: err}
		}
		if insn == 1 {
			return frames, Stop{Final: true, Why: fmt.Sprintf("%#x is entry code, marked EXIDX_CANTUNWIND", fn)}
		}
		var next [16]uint32
		if !retAddr && uint64(pc) == fn {
			// At a function's first instruction nothing is pushed: the
			// caller's frame, pc = lr (unwind_frame).
			if r[armLR] == pc {
				return frames, Stop{Err: fmt.Errorf("pc %#x at its function's entry with lr the same: %w", pc, ErrBadFrame)}
			}
			next = r
			next[armPC] = r[armLR]
			retAddr = true
		} else {
			ops, err := w.opcodes(ia, insn)
			if err != nil {
				return frames, Stop{Err: fmt.Errorf("pc %#x (function %#x): %w", pc, fn, err)}
			}
			next, retAddr, err = w.exec(r, ops)
			if err != nil {
				return frames, Stop{Err: fmt.Errorf("pc %#x (function %#x): %w", pc, fn, err)}
			}
		}
		nsp := next[armSP]
		if next[armPC] == pc && nsp == sp {
			return frames, Stop{Err: fmt.Errorf("pc %#x and sp %#x unchanged by their frame: %w", pc, sp, ErrBadFrame)}
		}
		if next[armPC] == 0 {
			return frames, Stop{Err: fmt.Errorf("return address 0 after pc %#x: %w", pc, ErrBadFrame)}
		}
		if uint64(next[armPC]) < opt.KernelStart {
			return frames, Stop{Err: fmt.Errorf("return address %#x after pc %#x is not in the kernel: %w", next[armPC], pc, ErrBadFrame)}
		}
		same := uint64(nsp)&^(opt.StackSize-1) == uint64(sp)&^(opt.StackSize-1)
		switch {
		case same && nsp < sp:
			return frames, Stop{Err: fmt.Errorf("stack pointer %#x after %#x goes back down its stack: %w", nsp, sp, ErrBadFrame)}
		case !same:
			if stacks++; stacks > opt.MaxStacks {
				return frames, Stop{Err: fmt.Errorf("stack pointer %#x: more than %d stack changes: %w", nsp, opt.MaxStacks, ErrBadFrame)}
			}
		}
		frames = append(frames, Frame{PC: uint64(next[armPC]), FP: uint64(nsp)})
		r = next
	}
	return frames, Stop{Err: fmt.Errorf("more than %d frames: %w", opt.MaxFrames, ErrBadFrame)}
}

type armWalker struct {
	kmem memory.Reader
	t    ARMTables
	bo   binary.ByteOrder
}

func (w *armWalker) word(addr uint64) (uint32, error) {
	return memory.Uint32(w.kmem, w.bo, addr)
}

// prel31 is the address a prel31 word v at addr refers to: bits 30–0 are
// a signed offset from addr, in the 32-bit address space.
func prel31(addr uint64, v uint32) uint64 {
	return uint64(uint32(addr) + uint32(int32(v<<1)>>1))
}

// find returns the function address, the address of the second word and
// that word of the index entry
// covering addr: in the table of the module whose text holds it, else
// vmlinux's; the last entry whose function is at or below addr, as the
// kernel's search_index.
func (w *armWalker) find(addr uint64) (fn, ia uint64, insn uint32, err error) {
	t := &w.t
	vml := t.InVmlinux == nil || t.InVmlinux(addr)
	if !vml && t.LoadModules != nil && t.Modules == nil && t.ModulesErr == nil {
		t.Modules, t.ModulesErr = t.LoadModules()
		t.LoadModules = nil
	}
	idx := &t.Vmlinux
	found := vml
	for i := range t.Modules {
		if m := &t.Modules[i]; addr >= m.TextStart && addr < m.TextEnd {
			idx, found = m, true
			break
		}
	}
	if !found {
		if t.ModulesErr != nil {
			return 0, 0, 0, fmt.Errorf("%#x: not vmlinux's text, and the modules' tables are not known (%w): %w", addr, t.ModulesErr, ErrARMUnwind)
		}
		return 0, 0, 0, fmt.Errorf("%#x: in no unwind table (neither vmlinux's text nor a module's): %w", addr, ErrARMUnwind)
	}
	where := "vmlinux"
	if idx.Name != "" {
		where = "[" + idx.Name + "]"
	}
	if idx.Stop < idx.Start || (idx.Stop-idx.Start)%8 != 0 || (idx.Stop-idx.Start)/8 > maxARMEntries {
		return 0, 0, 0, fmt.Errorf("%s unwind index [%#x, %#x): not a table of at most %d 8-byte entries: %w", where, idx.Start, idx.Stop, maxARMEntries, ErrBadFrame)
	}
	n := (idx.Stop - idx.Start) / 8
	fnAt := func(i uint64) (uint64, error) {
		a := idx.Start + 8*i
		v, err := w.word(a)
		if err != nil {
			return 0, fmt.Errorf("%s unwind index entry %d: %w", where, i, err)
		}
		if v&(1<<31) != 0 {
			return 0, fmt.Errorf("%s unwind index entry %d at %#x: %#x is no prel31 offset: %w", where, i, a, v, ErrBadFrame)
		}
		return prel31(a, v), nil
	}
	if n == 0 {
		return 0, 0, 0, fmt.Errorf("%#x: %s unwind index is empty: %w", addr, where, ErrARMUnwind)
	}
	first, err := fnAt(0)
	if err != nil {
		return 0, 0, 0, err
	}
	if addr < first {
		return 0, 0, 0, fmt.Errorf("%#x: below the first function of the %s unwind index (%#x): %w", addr, where, first, ErrARMUnwind)
	}
	lo, hi := uint64(0), n // the answer is in [lo, hi)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		a, err := fnAt(mid)
		if err != nil {
			return 0, 0, 0, err
		}
		if a <= addr {
			lo = mid
		} else {
			hi = mid
		}
	}
	if fn, err = fnAt(lo); err != nil {
		return 0, 0, 0, err
	}
	if fn > addr {
		// Only an unsorted table gets here.
		return 0, 0, 0, fmt.Errorf("%#x: %s unwind index is not sorted at entry %d (%#x): %w", addr, where, lo, fn, ErrBadFrame)
	}
	ia = idx.Start + 8*lo + 4
	if insn, err = w.word(ia); err != nil {
		return 0, 0, 0, fmt.Errorf("%s unwind index entry %d: %w", where, lo, err)
	}
	return fn, ia, insn, nil
}

// opcodes returns the unwind opcodes of the index entry whose second word,
// at ia, is insn: inline (bit 31 set: personality routine 0 only, as the
// kernel requires), else in the .ARM.extab entry at the prel31 offset it
// holds (routines 0, 1 and 2).
func (w *armWalker) opcodes(ia uint64, insn uint32) ([]byte, error) {
	if insn&(1<<31) != 0 {
		if insn>>24 != 0x80 {
			return nil, fmt.Errorf("index entry word %#x at %#x: only personality routine 0 can be inline: %w", insn, ia, ErrARMUnwind)
		}
		return compactOps(insn, nil)
	}
	extab := prel31(ia, insn)
	hdr, err := w.word(extab)
	if err != nil {
		return nil, fmt.Errorf("unwind table entry at %#x: %w", extab, err)
	}
	var more []uint32
	if k := hdr >> 24; k == 0x81 || k == 0x82 {
		n := int(hdr >> 16 & 0xff)
		b := make([]byte, 4*n)
		if err := memory.ReadFull(w.kmem, b, extab+4); err != nil {
			return nil, fmt.Errorf("unwind table entry at %#x: %d words: %w", extab, n, err)
		}
		for i := range n {
			more = append(more, w.bo.Uint32(b[4*i:]))
		}
	}
	ops, err := compactOps(hdr, more)
	if err != nil {
		return nil, fmt.Errorf("unwind table entry at %#x: %w", extab, err)
	}
	return ops, nil
}

// compactOps returns the opcodes of an entry whose first word is hdr and
// whose further words (routines 1 and 2) are more.
func compactOps(hdr uint32, more []uint32) ([]byte, error) {
	var ops []byte
	switch hdr >> 24 {
	case 0x80:
		ops = []byte{byte(hdr >> 16), byte(hdr >> 8), byte(hdr)}
	case 0x81, 0x82:
		ops = append(make([]byte, 0, 2+4*len(more)), byte(hdr>>8), byte(hdr))
		for _, m := range more {
			ops = append(ops, byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
		}
	default:
		if hdr&(1<<31) == 0 {
			return nil, fmt.Errorf("generic personality routine (%#x), which kernel code does not have: %w", hdr, ErrARMUnwind)
		}
		return nil, fmt.Errorf("personality routine %d (%#x) is not one EHABI defines: %w", hdr>>24&0x7f, hdr, ErrARMUnwind)
	}
	return ops, nil
}

// exec runs the opcodes ops on the registers r, as the kernel's
// unwind_exec_insn does, and returns the caller's registers and whether
// its pc is a return address (taken from r14) rather than a popped r15.
// It stops at "finish" or the end of ops; work is bounded by len(ops)
// (at most 1,022 bytes: 2 plus 255 words).
func (w *armWalker) exec(r [16]uint32, ops []byte) ([16]uint32, bool, error) {
	vsp := r[armSP]
	r[armPC] = 0
	pcPopped := false
	pop := func(reg int) error {
		v, err := w.word(uint64(vsp))
		if err != nil {
			return fmt.Errorf("popping r%d: %w", reg, err)
		}
		r[reg] = v
		vsp += 4
		if reg == armPC {
			pcPopped = true
		}
		return nil
	}
	next := func(i int, op byte) (byte, error) {
		if i >= len(ops) {
			return 0, fmt.Errorf("opcode %#02x without its operand: %w", op, ErrARMUnwind)
		}
		return ops[i], nil
	}
	for i := 0; i < len(ops); {
		op := ops[i]
		i++
		switch {
		case op&0xc0 == 0x00:
			vsp += uint32(op&0x3f)<<2 + 4
		case op&0xc0 == 0x40:
			vsp -= uint32(op&0x3f)<<2 + 4
		case op&0xf0 == 0x80:
			b, err := next(i, op)
			if err != nil {
				return r, false, err
			}
			i++
			mask := uint16(op&0x0f)<<8 | uint16(b)
			if mask == 0 {
				return r, false, fmt.Errorf("\"refuse to unwind\" (0x8000): %w", ErrARMUnwind)
			}
			// A popped r13 is the new vsp; the others move it on.
			var newSP uint32
			loadSP := false
			for reg := 4; reg <= 15; reg++ {
				if mask&(1<<(reg-4)) == 0 {
					continue
				}
				if err := pop(reg); err != nil {
					return r, false, err
				}
				if reg == armSP {
					newSP, loadSP = r[armSP], true
				}
			}
			if loadSP {
				vsp = newSP
			}
		case op&0xf0 == 0x90:
			n := op & 0x0f
			if n == 13 || n == 15 {
				return r, false, fmt.Errorf("reserved opcode %#02x: %w", op, ErrARMUnwind)
			}
			vsp = r[n]
		case op&0xf0 == 0xa0:
			for reg := 4; reg <= 4+int(op&7); reg++ {
				if err := pop(reg); err != nil {
					return r, false, err
				}
			}
			if op&8 != 0 {
				if err := pop(armLR); err != nil {
					return r, false, err
				}
			}
		case op == 0xb0: // finish
			i = len(ops)
		case op == 0xb1:
			mask, err := next(i, op)
			if err != nil {
				return r, false, err
			}
			i++
			if mask == 0 || mask&0xf0 != 0 {
				return r, false, fmt.Errorf("spare opcode %#02x %#02x: %w", op, mask, ErrARMUnwind)
			}
			for reg := 0; reg < 4; reg++ {
				if mask&(1<<reg) != 0 {
					if err := pop(reg); err != nil {
						return r, false, err
					}
				}
			}
		case op == 0xb2: // vsp += 0x204 + (uleb128 << 2)
			var v uint32
			for shift := 0; ; shift += 7 {
				b, err := next(i, op)
				if err != nil {
					return r, false, err
				}
				i++
				if shift > 28 {
					return r, false, fmt.Errorf("uleb128 of opcode 0xb2 longer than 32 bits: %w", ErrARMUnwind)
				}
				v |= uint32(b&0x7f) << shift
				if b&0x80 == 0 {
					break
				}
			}
			vsp += 0x204 + v<<2
		case op == 0xb3, op == 0xc8, op == 0xc9: // VFP doubles D[ssss]–D[ssss+cccc]
			b, err := next(i, op)
			if err != nil {
				return r, false, err
			}
			i++
			vsp += (uint32(b&0x0f) + 1) * 8
			if op == 0xb3 {
				vsp += 4 // FSTMFDX's extra word
			}
		case op&0xf8 == 0xb8: // VFP D[8]–D[8+nnn], FSTMFDX
			vsp += (uint32(op&7)+1)*8 + 4
		case op&0xf8 == 0xd0: // VFP D[8]–D[8+nnn], VPUSH
			vsp += (uint32(op&7) + 1) * 8
		default:
			return r, false, fmt.Errorf("opcode %#02x (spare or iWMMXt), which kernel code does not have: %w", op, ErrARMUnwind)
		}
	}
	r[armSP] = vsp
	if !pcPopped || r[armPC] == 0 {
		r[armPC] = r[armLR]
		return r, true, nil
	}
	return r, false, nil
}

// ARMEntry is what an unwind index says of a code address.
type ARMEntry struct {
	Func       uint64 // the first instruction of the function covering it
	CantUnwind bool   // EXIDX_CANTUNWIND: entry code
	Opcodes    []byte // the unwind opcodes; nil when CantUnwind
}

// ARMLookup returns the index entry covering addr in vmlinux's or, for an
// address in a module's text, that module's table, as the walk finds it
// (errors wrap ErrARMUnwind, ErrBadFrame or a *memory.FaultError).
func ARMLookup(kmem memory.Reader, t ARMTables, target memory.Target, addr uint64) (ARMEntry, error) {
	if err := target.Check(); err != nil {
		return ARMEntry{}, fmt.Errorf("unwind: %w", err)
	}
	w := armWalker{kmem: kmem, t: t, bo: target.ByteOrder}
	fn, ia, insn, err := w.find(addr)
	if err != nil {
		return ARMEntry{}, err
	}
	if insn == 1 {
		return ARMEntry{Func: fn, CantUnwind: true}, nil
	}
	ops, err := w.opcodes(ia, insn)
	if err != nil {
		return ARMEntry{}, err
	}
	return ARMEntry{Func: fn, Opcodes: ops}, nil
}
