// Package unwind walks a CPU's kernel stack from the registers a crash dump
// saved, with no debug info.
//
// FramePointer follows frame records: where a kernel is built with frame
// pointers (arm64 always; i386 with CONFIG_UNWINDER_FRAME_POINTER, the
// 32-bit default), each function's prologue stores the caller's frame
// pointer and its return address side by side, [fp] and [fp+word], and
// points the frame pointer register (x29 on arm64, ebp on i386) at that
// pair. The walk starts at the saved program counter and frame pointer and
// stops at the kernel's final frame record (a zero frame pointer), at a
// frame pointer that is misaligned, unreadable or goes backwards on its
// stack, at a return address outside the kernel, or after MaxFrames.
// Each stop says why.
//
// x86_64 kernels built with the ORC unwinder (Debian's) keep no frame
// pointers; their unwinding is not here yet.
//
// # Security
//
// Built for untrusted input, and fuzzed: the walk reads two words a frame,
// visits at most MaxFrames frames, and requires frame pointers to grow
// within one stack, so a loop of frame records ends.
package unwind
