package tasks

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ErrNoSwitchFrame means the layout has no struct inactive_task_frame
// (an architecture other than x86, or a layout source without it).
var ErrNoSwitchFrame = errors.New("no struct inactive_task_frame in the layouts")

// SwitchFrame is where a switched-out x86_64 task resumes: the struct
// inactive_task_frame __switch_to_asm pushed at thread.sp
// (arch/x86/include/asm/switch_to.h; arch/x86/entry/entry_64.S).
type SwitchFrame struct {
	// IP is the frame's ret_addr (a return address into __schedule), SP
	// the stack pointer above the frame, BP the saved frame pointer: what
	// the kernel's unwind_start takes for a task other than current
	// (arch/x86/kernel/unwind_orc.c, 6.1 and 6.12).
	IP, SP, BP uint64
}

// SwitchFrame reads the switch frame of t, which must not be running:
// its thread.sp (read from the task_struct at t.Addr) and the frame above it must lie in its kernel stack,
// [t.Stack, t.Stack+stackSize) (THREAD_SIZE: 16 KiB on x86_64, 32 KiB
// with KASAN). An sp outside it is an error wrapping ErrCorrupt.
func (l *Layout) SwitchFrame(mem memory.Reader, tgt memory.Target, t *Task, stackSize uint64) (SwitchFrame, error) {
	if l.frameSize == 0 || l.sp.size == 0 {
		return SwitchFrame{}, ErrNoSwitchFrame
	}
	sp, err := memory.Uint64(mem, tgt.ByteOrder, t.Addr+l.sp.off)
	if err != nil {
		return SwitchFrame{}, fmt.Errorf("tasks: task %d: thread.sp: %w", t.PID, err)
	}
	if t.Stack == 0 || t.Stack+stackSize < t.Stack || sp < t.Stack || sp > t.Stack+stackSize-l.frameSize {
		return SwitchFrame{}, fmt.Errorf("tasks: task %d: thread.sp %#x is outside its stack [%#x, %#x): %w",
			t.PID, sp, t.Stack, t.Stack+stackSize, ErrCorrupt)
	}
	bp, err := memory.Uint64(mem, tgt.ByteOrder, sp+l.frameBP.off)
	if err != nil {
		return SwitchFrame{}, fmt.Errorf("tasks: task %d: switch frame: %w", t.PID, err)
	}
	ip, err := memory.Uint64(mem, tgt.ByteOrder, sp+l.frameRet.off)
	if err != nil {
		return SwitchFrame{}, fmt.Errorf("tasks: task %d: switch frame: %w", t.PID, err)
	}
	return SwitchFrame{IP: ip, SP: sp + l.frameSize, BP: bp}, nil
}

// ErrNoCPUContext means the layout has no thread.cpu_context (an
// architecture other than arm64, or a layout source without it).
var ErrNoCPUContext = errors.New("no thread.cpu_context in the layouts")

// CPUContext is what an arm64 task switched out keeps in
// thread.cpu_context (arch/arm64/include/asm/processor.h; cpu_switch_to in
// arch/arm64/kernel/entry.S saves x19–x28, fp, sp and lr as pc): where the
// kernel's stack walk of a task other than current starts
// (arch/arm64/kernel/stacktrace.c, thread_saved_fp and thread_saved_pc).
type CPUContext struct{ FP, SP, PC uint64 }

// CPUContext reads t's saved context; t must not be running. Its sp must
// lie in its kernel stack, [t.Stack, t.Stack+stackSize), or the error
// wraps ErrCorrupt.
func (l *Layout) CPUContext(mem memory.Reader, tgt memory.Target, t *Task, stackSize uint64) (CPUContext, error) {
	if l.ctxPC.size == 0 {
		return CPUContext{}, ErrNoCPUContext
	}
	var c CPUContext
	for _, f := range []struct {
		dst *uint64
		fl  field
	}{{&c.FP, l.ctxFP}, {&c.SP, l.ctxSP}, {&c.PC, l.ctxPC}} {
		v, err := memory.Uint64(mem, tgt.ByteOrder, t.Addr+f.fl.off)
		if err != nil {
			return CPUContext{}, fmt.Errorf("tasks: task %d: %s: %w", t.PID, f.fl.name, err)
		}
		*f.dst = v
	}
	if t.Stack == 0 || t.Stack+stackSize < t.Stack || c.SP < t.Stack || c.SP > t.Stack+stackSize {
		return CPUContext{}, fmt.Errorf("tasks: task %d: thread.cpu_context.sp %#x is outside its stack [%#x, %#x): %w",
			t.PID, c.SP, t.Stack, t.Stack+stackSize, ErrCorrupt)
	}
	return c, nil
}
