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
// its thread.sp and the frame above it must lie in its kernel stack,
// [t.Stack, t.Stack+stackSize) (THREAD_SIZE: 16 KiB on x86_64, 32 KiB
// with KASAN). An sp outside it is an error wrapping ErrCorrupt.
func (l *Layout) SwitchFrame(mem memory.Reader, tgt memory.Target, t *Task, stackSize uint64) (SwitchFrame, error) {
	if l.frameSize == 0 || l.sp.size == 0 {
		return SwitchFrame{}, ErrNoSwitchFrame
	}
	sp := t.SP
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
