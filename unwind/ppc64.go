package unwind

import (
	"fmt"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ppc64's back chain (the ELF ABIs; arch/powerpc/kernel/process.c
// show_stack, arch/powerpc/include/asm/ptrace.h): each frame keeps the
// caller's stack pointer at offset 0 and, at offset 16 (STACK_FRAME_LR_SAVE,
// two words), the link register a function it called saved there: the
// address it returns to in the frame's function. An interrupt frame holds
// a marker and, after it, the interrupted struct pt_regs: the marker
// "REGS" (v6.2+; 0x53474552 as a ppc64le word, 0x52454753 big-endian) at
// 32 with pt_regs at 48 on ELFv2, at 96 and 112 on ELFv1; before v6.2
// "regshere" (0x7265677368657265), or briefly "regs", at 96 with pt_regs
// at 112. Its nip is where the interrupted code was, and an msr with PR set
// is an entry from user space, where the kernel stack ends.
const (
	ppcLRSave    = 16
	ppcPtRegsNIP = 32 * 8 // struct pt_regs: gpr[32], nip, msr
	ppcPtRegsMSR = 33 * 8
	ppcMSRPR     = 1 << 14 // MSR_PR: problem state (user mode)
	ppcMaxRegsAt = 112     // the farthest pt_regs offset
)

// ppcIntFrames are the [marker offset, pt_regs offset] pairs of interrupt
// frames, and ppcMarkers the values of STACK_FRAME_REGS_MARKER.
var (
	ppcIntFrames = [...][2]uint64{{32, 48}, {96, 112}}
	ppcMarkers   = [...]uint64{0x53474552, 0x52454753, 0x7265677368657265, 0x72656773}
)

// BackChainPPC64 walks ppc64 stack frames from pc (nip) and sp (r1) as the
// kernel's show_stack does: every frame's saved link register in turn (the
// first may be stale: the kernel prints it "(unreliable)"; one that is no
// instruction address, not 4-byte aligned, is left out), through
// interrupt frames to the interrupted nip, up to a zero back chain or an
// entry from user space. Pointers are 8 bytes, in Options.Target's byte
// order (ppc64le or ppc64), which must be known.
func BackChainPPC64(kmem memory.Reader, pc, sp uint64, opt Options) ([]Frame, Stop) {
	bo := opt.Target.ByteOrder
	if bo == nil {
		return nil, Stop{Err: fmt.Errorf("unwind: ppc64: no byte order: %w", memory.ErrUnknownTarget)}
	}
	opt.setLimits()
	frames := []Frame{{PC: pc}}
	stacks := 0
	firstSP := sp
	word := memory.Target{ByteOrder: bo, PtrSize: 8}
	read := func(addr uint64) (uint64, error) { return word.ReadPointer(kmem, addr) }
	for len(frames) < opt.MaxFrames {
		if sp%16 != 0 || sp < opt.KernelStart || sp > ^uint64(0)-ppcMaxRegsAt-ppcPtRegsMSR-8 {
			return frames, Stop{Err: fmt.Errorf("stack pointer %#x misaligned or outside the kernel: %w", sp, ErrBadFrame)}
		}
		next, err := read(sp)
		if err != nil {
			return frames, Stop{Err: fmt.Errorf("back chain of the frame at %#x: %w", sp, err)}
		}
		ret, err := read(sp + ppcLRSave)
		if err != nil {
			return frames, Stop{Err: fmt.Errorf("saved link register of the frame at %#x: %w", sp, err)}
		}
		switch {
		case ret < opt.KernelStart:
		case ret%4 != 0:
			// Instructions are 4-byte aligned: no call returns here. The
			// first frame's word may be stale (the kernel prints it
			// "unreliable"; enter_rtas never writes it): no frame; a
			// later one's is damage.
			if sp != firstSP {
				return frames, Stop{Err: fmt.Errorf("saved link register %#x of the frame at %#x is not an instruction address: %w", ret, sp, ErrBadFrame)}
			}
		default:
			frames = append(frames, Frame{PC: ret, FP: sp})
		}
		for _, off := range ppcIntFrames {
			m, err := read(sp + off[0])
			if err != nil || !slices.Contains(ppcMarkers[:], m) {
				continue
			}
			regs := sp + off[1]
			msr, err := read(regs + ppcPtRegsMSR)
			if err != nil {
				return frames, Stop{Err: fmt.Errorf("pt_regs at %#x: %w", regs, err)}
			}
			if msr&ppcMSRPR != 0 {
				return frames, Stop{Final: true, Why: "entry from user space"}
			}
			nip, err := read(regs + ppcPtRegsNIP)
			if err != nil {
				return frames, Stop{Err: fmt.Errorf("pt_regs at %#x: %w", regs, err)}
			}
			if len(frames) < opt.MaxFrames {
				frames = append(frames, Frame{PC: nip, FP: sp})
			}
			break
		}
		if next == 0 {
			return frames, final
		}
		if err := progress("back chain", next, sp, &stacks, opt); err != nil {
			return frames, Stop{Err: err}
		}
		sp = next
	}
	return frames, Stop{Err: fmt.Errorf("more than %d frames: %w", opt.MaxFrames, ErrBadFrame)}
}
