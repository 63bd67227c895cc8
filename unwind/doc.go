// Package unwind walks a CPU's kernel stack from the registers a crash dump
// saved, with no debug info.
//
// FramePointer follows frame records: where a kernel is built with frame
// pointers (arm64 always; i386 with CONFIG_UNWINDER_FRAME_POINTER, the
// 32-bit default), each function's prologue stores the caller's frame
// pointer and its return address side by side, [fp] and [fp+word], and
// points the frame pointer register (x29 on arm64, ebp on i386) at that
// pair. riscv64 (CONFIG_FRAME_POINTER, Debian's) points s0 just above the
// pair instead, at [fp−2 words] and [fp−word] (Options.RecordBelow), and
// a leaf function that saved no ra holds the caller's frame pointer in
// the ra slot, which the walk recognises in the first frame as the
// kernel's walk_stackframe does (Options.RA). riscv64's trap entry keeps
// no frame record: a return address into it (Options.ExceptionEntry) has
// the walk cross the trap's struct pt_regs to the interrupted code, as
// walk_stackframe does, and mark that frame (Frame.Regs); a trap from
// user mode ends the stack (riscv64.go). The walk starts at the saved program counter and frame pointer and
// stops at the kernel's final frame record (a zero frame pointer), at a
// frame pointer that is misaligned, unreadable or goes backwards on its
// stack, at a return address outside the kernel, or after MaxFrames.
// Each stop says why.
//
// ORC walks x86_64 kernels built with the ORC unwinder (Debian's), which
// keep no frame pointers, with the kernel's own ORC tables from the dump
// (orc.go), vmlinux's and each module's: calls, pt_regs of interrupts and
// exceptions, iret frames, in the three entry layouts of 4.14–6.2, 6.3 and
// 6.4 on, checked against the .orc_header hash where the kernel has one
// (an unknown hash is refused, not guessed at). BackChainS390 walks
// s390x's back chain, BackChainPPC64 ppc64's (through interrupt frames).
// ARM walks 32-bit ARM kernels built with CONFIG_ARM_UNWIND (Debian's
// armmp) with the kernel's EHABI unwind tables (arm.go): vmlinux's index
// and each module's, through exception frames (the entry code's saved
// pt_regs), up to the entry code marked EXIDX_CANTUNWIND.
//
// # Security
//
// Built for untrusted input, and fuzzed: each walk reads a few words a
// frame (ORC: a binary search of at most 2^24 entries; a module's num_orcs
// is checked against its text size first; ARM: a binary search of at most
// 2^21 index entries and at most 1,022 opcodes), visits at most
// MaxFrames frames, and requires the stack to grow within one stack, with
// at most MaxStacks moves between stacks, so a loop of frames ends.
package unwind
