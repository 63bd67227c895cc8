package unwind

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// s390x's back chain (arch/s390/include/asm/stacktrace.h, struct
// stack_frame, built with -mpacked-stack -mbackchain): each 160-byte frame
// keeps the caller's stack pointer at offset 152 and, in the save area at
// 72, the registers r6–r15 a callee stores there, r14 (the return address)
// at 136. A zero back chain ends a stack: a struct pt_regs follows the
// frame, from an interrupt (the walk goes on at its PSW) or from user space
// (the walk ends).
const (
	s390FrameSize     = 160 // STACK_FRAME_OVERHEAD
	s390BackChain     = 152
	s390SavedR14      = 136
	s390PtRegsPSWMask = 8 // struct pt_regs: args[1], then psw (mask, addr), then gprs[16]
	s390PtRegsPSWAddr = 16
	s390PtRegsR15     = 24 + 15*8
	s390PSWProblem    = 1 << 48 // PSW_MASK_PSTATE: user mode
)

// BackChainS390 walks s390x stack frames from pc (the PSW address) and sp
// (r15), as the kernel's unwind_bc does. Pointers are 8 bytes, big-endian,
// whatever Options.Target says.
func BackChainS390(kmem memory.Reader, pc, sp uint64, opt Options) ([]Frame, Stop) {
	opt.setLimits()
	frames := []Frame{{PC: pc}}
	stacks := 0
	word := memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}
	read := func(addr uint64) (uint64, error) { return word.ReadPointer(kmem, addr) }
	for len(frames) < opt.MaxFrames {
		if sp%8 != 0 || sp > ^uint64(0)-s390FrameSize-s390PtRegsR15-8 {
			return frames, Stop{Err: fmt.Errorf("stack pointer %#x misaligned: %w", sp, ErrBadFrame)}
		}
		next, err := read(sp + s390BackChain)
		if err != nil {
			return frames, Stop{Err: fmt.Errorf("back chain of the frame at %#x: %w", sp, err)}
		}
		var ret uint64
		if next != 0 {
			if ret, err = read(next + s390SavedR14); err != nil {
				return frames, Stop{Err: fmt.Errorf("saved r14 of the frame at %#x: %w", next, err)}
			}
		} else {
			// No back chain: the pt_regs of an interrupt or of an entry
			// from user space follow the frame.
			regs := sp + s390FrameSize
			mask, err := read(regs + s390PtRegsPSWMask)
			if err != nil {
				return frames, Stop{Err: fmt.Errorf("pt_regs at %#x: %w", regs, err)}
			}
			if mask&s390PSWProblem != 0 {
				return frames, Stop{Final: true, Why: "entry from user space"}
			}
			if ret, err = read(regs + s390PtRegsPSWAddr); err == nil {
				next, err = read(regs + s390PtRegsR15)
			}
			if err != nil {
				return frames, Stop{Err: fmt.Errorf("pt_regs at %#x: %w", regs, err)}
			}
			if next == 0 {
				return frames, final
			}
		}
		if ret < opt.KernelStart {
			return frames, Stop{Err: fmt.Errorf("return address %#x of the frame at %#x is not in the kernel: %w", ret, next, ErrBadFrame)}
		}
		frames = append(frames, Frame{PC: ret, FP: next})
		if err := progress("back chain", next, sp, &stacks, opt); err != nil {
			return frames, Stop{Err: err}
		}
		sp = next
	}
	return frames, Stop{Err: fmt.Errorf("more than %d frames: %w", opt.MaxFrames, ErrBadFrame)}
}
