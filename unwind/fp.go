package unwind

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Frame is one frame of a walk: the address the CPU was at (the first
// frame) or will return to.
type Frame struct {
	PC uint64
	FP uint64 // the frame pointer whose record gave PC; 0 for the first frame
	// Regs is, for a PC read from an exception frame (the interrupted
	// program counter the kernel's trap entry saved in a struct pt_regs),
	// the address of that struct pt_regs; 0 for a return address or the
	// first frame.
	Regs uint64
	// Recovered, when set, says how this frame was found where the
	// unwinder's own rules gave none (ORC: after a first frame without a
	// usable entry; see Recovery).
	Recovered *Recovery
}

// Range is the address range [Start, End).
type Range struct{ Start, End uint64 }

// Contains reports whether a lies in r.
func (r Range) Contains(a uint64) bool { return a >= r.Start && a < r.End }

// Options describe the kernel a walk reads.
type Options struct {
	// Target is the kernel's machine. FramePointer needs its ByteOrder
	// and PtrSize, BackChainPPC64 its ByteOrder (see memory.Target);
	// BackChainS390 and ORC, each for one machine, do not read it.
	Target memory.Target
	// KernelStart is the lowest kernel text address: a return address
	// below it ends the walk (user space, or garbage).
	KernelStart uint64
	// UserEnd is where user space ends (TASK_SIZE): a frame pointer below
	// it is a user one saved at entry from user mode, and ends the kernel
	// stack. 0: no such check.
	UserEnd uint64
	// PACMask is arm64's KERNELPACMASK (VMCOREINFO): the bits a pointer
	// authentication code may take in a return address, set again to
	// strip it. 0 elsewhere.
	PACMask uint64
	// StackSize is THREAD_SIZE, the size and alignment of a kernel stack:
	// frame pointers must grow within one such region, and may move to
	// another region (an interrupt stack returning to the task's) at most
	// MaxStacks times. Default 16 KiB (arm64 and x86 with 4 KiB pages).
	StackSize uint64
	MaxFrames int // default 128
	MaxStacks int // default 4
	// RecordBelow is riscv64's layout: the frame pointer (s0) points just
	// above its record {fp, ra}, which sits at fp − 2 words
	// (arch/riscv/kernel/stacktrace.c, struct stackframe); elsewhere the
	// record is at fp.
	RecordBelow bool
	// RA is riscv64's ra register of the first frame, for a leaf function
	// that saved no return address: its record holds the caller's frame
	// pointer where ra would be, and, as the kernel's walk_stackframe
	// does, a value there that lies on the same stack at or above fp is
	// taken as the next frame pointer and RA as the return address (the
	// frame after an exception frame gets the same test with the ra
	// saved there). 0: no such check.
	RA uint64
	// ExceptionEntry is riscv64's trap entry code, [handle_exception,
	// ret_from_exception_end) from the kernel's symbols; the zero Range:
	// none. A return address inside it is where a handler the entry code
	// called (do_irq, do_page_fault, do_trap_ecall_u, …) returns to, and
	// that handler's frame pointer is the entry code's stack pointer, the
	// struct pt_regs of the trap: the walk crosses it to the interrupted
	// epc, s0 and ra (riscv64.go).
	ExceptionEntry Range
	// Text is where kernel code can be (riscv64: vmlinux's text and init
	// text, the module area): a pc read from an exception frame outside
	// it ends the walk, as the kernel's walk ends at a pc that is no
	// kernel text address. Empty: any address from KernelStart.
	Text []Range
}

// Stop says why a walk ended.
type Stop struct {
	// Final is true where the kernel's stack ends: its final frame record
	// (a zero frame pointer), or a frame pointer into user space (an entry
	// from user mode that saved none). Why says which.
	Final bool
	Why   string
	Err   error // why else; nil when Final
}

func (s Stop) String() string {
	if s.Final {
		return "end of stack (" + s.Why + ")"
	}
	return s.Err.Error()
}

var final = Stop{Final: true, Why: "final frame record"}

// ErrBadFrame means the frame chain leaves what a kernel stack can be: a
// misaligned or shrinking frame pointer, a return address outside the
// kernel, too many frames or stacks.
var ErrBadFrame = errors.New("unwind: frame chain ends")

// setLimits gives StackSize, MaxFrames and MaxStacks their defaults where
// they are zero: every walk bounds itself by them.
func (opt *Options) setLimits() {
	if opt.StackSize == 0 {
		opt.StackSize = 16 << 10
	}
	if opt.MaxFrames == 0 {
		opt.MaxFrames = 128
	}
	if opt.MaxStacks == 0 {
		opt.MaxStacks = 4
	}
}

// FramePointer walks frame records from pc and fp. It returns the frames,
// the first being pc, and why the walk stopped; unreadable memory stops it
// with the *memory.FaultError, corrupt frames with ErrBadFrame, an
// incomplete opt.Target with memory.ErrUnknownTarget before any frame.
func FramePointer(kmem memory.Reader, pc, fp uint64, opt Options) ([]Frame, Stop) {
	if err := opt.Target.Check(); err != nil {
		return nil, Stop{Err: fmt.Errorf("unwind: %w", err)}
	}
	opt.setLimits()
	w := uint64(opt.Target.PtrSize)
	if opt.StackSize&(opt.StackSize-1) != 0 {
		return nil, Stop{Err: fmt.Errorf("unwind: stack size %d: %w", opt.StackSize, errors.ErrUnsupported)}
	}
	frames := []Frame{{PC: pc}}
	stacks := 0
	ra := opt.RA // the ra register of the newest frame, where registers gave it
	var rec [16]byte
	for len(frames) < opt.MaxFrames {
		if fp == 0 {
			return frames, final
		}
		if fp < opt.UserEnd {
			return frames, Stop{Final: true, Why: fmt.Sprintf("frame pointer %#x in user space", fp)}
		}
		if fp%w != 0 || fp > ^uint64(0)-2*w || opt.RecordBelow && fp < 2*w {
			return frames, Stop{Err: fmt.Errorf("frame pointer %#x misaligned: %w", fp, ErrBadFrame)}
		}
		at := fp
		if opt.RecordBelow {
			at = fp - 2*w
		}
		if err := memory.ReadFull(kmem, rec[:2*w], at); err != nil {
			return frames, Stop{Err: fmt.Errorf("frame record at %#x: %w", at, err)}
		}
		next, ret := opt.Target.Pointer(rec[:]), opt.Target.Pointer(rec[w:])
		if ret == 0 && next == 0 {
			return frames, final // the final record holds zeros
		}
		if ra != 0 && ret >= fp && ret%w == 0 && ret&^(opt.StackSize-1) == fp&^(opt.StackSize-1) {
			next, ret = ret, ra // a leaf: no ra saved, the caller's fp in its slot
		}
		ra = 0
		if opt.PACMask != 0 && ret&(1<<55) != 0 {
			ret |= opt.PACMask
		}
		if ret < opt.KernelStart {
			return frames, Stop{Err: fmt.Errorf("return address %#x at %#x is not in the kernel: %w", ret, at+w, ErrBadFrame)}
		}
		frames = append(frames, Frame{PC: ret, FP: fp})
		if opt.ExceptionEntry.Contains(ret) {
			x, stop, ok := crossRISCV64(kmem, fp, &stacks, opt)
			if !ok {
				return frames, stop
			}
			if len(frames) == opt.MaxFrames {
				break
			}
			frames = append(frames, Frame{PC: x.epc, FP: fp, Regs: fp})
			fp, ra = x.s0, x.ra
			continue
		}
		if next != 0 {
			if err := progress("frame pointer", next, fp, &stacks, opt); err != nil {
				return frames, Stop{Err: err}
			}
		}
		fp = next
	}
	return frames, Stop{Err: fmt.Errorf("more than %d frames: %w", opt.MaxFrames, ErrBadFrame)}
}

// progress checks that a walk moving from the frame at cur to the one at
// next goes up its stack, or to another stack at most opt.MaxStacks times
// in all (counted in stacks): what keeps a looping chain from hanging.
func progress(what string, next, cur uint64, stacks *int, opt Options) error {
	same := next&^(opt.StackSize-1) == cur&^(opt.StackSize-1)
	switch {
	case same && next <= cur:
		return fmt.Errorf("%s %#x after %#x goes back down its stack: %w", what, next, cur, ErrBadFrame)
	case !same:
		*stacks++
		if *stacks > opt.MaxStacks {
			return fmt.Errorf("%s %#x: more than %d stack changes: %w", what, next, opt.MaxStacks, ErrBadFrame)
		}
	}
	return nil
}
