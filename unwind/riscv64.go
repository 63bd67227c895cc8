package unwind

import (
	"fmt"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// riscv64's exception frames (v6.12, v7.2; arch/riscv/kernel/entry.S,
// stacktrace.c walk_stackframe, include/asm/ptrace.h). The trap vector,
// handle_exception, saves every register in a struct pt_regs it makes at
// the bottom of the stack it was on (kernel stack, IRQ stack), leaves sp
// there, loads s0 with the interrupted sp, and calls its handler (`call
// do_irq`, or `jalr` through excp_vect_table: do_page_fault,
// do_trap_ecall_u, …), then jumps to ret_from_exception. The handler's
// prologue saves ra, an address inside [handle_exception,
// ret_from_exception_end), and sets its frame pointer to its entry sp: the
// struct pt_regs. There the kernel's own walk_stackframe takes the
// interrupted pc and frame pointer from pt_regs' epc and s0 ("pc >=
// handle_exception && pc < ret_from_exception_end"), and so does the walk
// here, with the interrupted ra for a leaf function (Options.RA's rule).
// struct pt_regs is epc, then x1–x31 in register order (ra, sp, gp, tp,
// t0–t2, s0, …), then status, badaddr, cause, orig_a0; status's SPP bit
// (SR_SPP, bit 8) is clear for a trap from user mode (user_mode()).
const (
	rvPtRegsEPC    = 0
	rvPtRegsRA     = 1 * 8
	rvPtRegsSP     = 2 * 8
	rvPtRegsS0     = 8 * 8
	rvPtRegsStatus = 32 * 8
	rvStatusSPP    = 1 << 8
)

// rvRegs is what the walk takes from an exception frame.
type rvRegs struct{ epc, ra, sp, s0 uint64 }

// crossRISCV64 reads the struct pt_regs at regs, which the frame record of
// a handler returning into the trap entry code points at, and checks that
// the walk can go on from it: a trap from kernel mode, at an epc in kernel
// text (Options.Text, where given), whose s0 (unless zero, the end of the stack) lies at or above
// the interrupted sp on that sp's stack and above regs (progress counts a
// move to another stack). It returns false with why the walk stops: an
// unreadable struct pt_regs, a trap from user mode (the end of the kernel
// stack), or a frame that cannot be.
func crossRISCV64(kmem memory.Reader, regs uint64, stacks *int, opt Options) (rvRegs, Stop, bool) {
	var b [rvPtRegsStatus + 8]byte
	if regs > ^uint64(0)-uint64(len(b)) {
		return rvRegs{}, Stop{Err: fmt.Errorf("exception frame at %#x: %w", regs, ErrBadFrame)}, false
	}
	if err := memory.ReadFull(kmem, b[:], regs); err != nil {
		return rvRegs{}, Stop{Err: fmt.Errorf("exception frame (struct pt_regs) at %#x: %w", regs, err)}, false
	}
	t := opt.Target
	x := rvRegs{
		epc: t.Pointer(b[rvPtRegsEPC:]),
		ra:  t.Pointer(b[rvPtRegsRA:]),
		sp:  t.Pointer(b[rvPtRegsSP:]),
		s0:  t.Pointer(b[rvPtRegsS0:]),
	}
	if t.Pointer(b[rvPtRegsStatus:])&rvStatusSPP == 0 {
		return x, Stop{Final: true, Why: fmt.Sprintf("exception frame at %#x: a trap from user mode at %#x", regs, x.epc)}, false
	}
	if x.epc < opt.KernelStart || len(opt.Text) > 0 && !slices.ContainsFunc(opt.Text, func(r Range) bool { return r.Contains(x.epc) }) {
		return x, Stop{Err: fmt.Errorf("exception frame at %#x: epc %#x is not kernel text: %w", regs, x.epc, ErrBadFrame)}, false
	}
	if x.s0 != 0 {
		if x.s0 < x.sp || x.s0&^(opt.StackSize-1) != x.sp&^(opt.StackSize-1) {
			return x, Stop{Err: fmt.Errorf("exception frame at %#x: s0 %#x is not on the interrupted stack (sp %#x): %w", regs, x.s0, x.sp, ErrBadFrame)}, false
		}
		if err := progress("frame pointer", x.s0, regs, stacks, opt); err != nil {
			return x, Stop{Err: err}, false
		}
	}
	return x, Stop{}, true
}
