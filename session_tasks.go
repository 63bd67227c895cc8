package kdumpsyms

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/tasks"
	"github.com/kdumpsyms/kdumpsyms/unwind"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Tasks lists the dump's tasks (see tasks.Read), once: the idle task of
// each CPU, every thread group and its threads, with struct layouts from
// the session's layout source (the dump's BTF, or Options.Layout). The
// error is one that left nothing listed: no init_task, or layouts without
// task_struct (a *NeedsError of SourceTasks needing NeedBTF: inferred
// layouts do not have it); the list's Problems say what could not be read.
func (s *Session) Tasks() (*tasks.List, error) {
	return s.tasksOnce()
}

func (s *Session) listTasks() (*tasks.List, error) {
	kmem, err := s.Kernel()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: tasks: %w", err)
	}
	k, err := s.Kallsyms()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: tasks: %w", err)
	}
	src, err := s.layout()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: tasks: %w", err)
	}
	l, err := tasks.NewLayout(src)
	if err != nil {
		// Inferred layouts hold struct module's fields only: the tasks
		// need the dump's BTF, or a layout source that has task_struct.
		return nil, &NeedsError{Source: SourceTasks, Needs: NeedBTF, Err: err}
	}
	return tasks.Read(kmem, tasks.Options{
		Target: s.target(),
		Layout: l,
		Symbol: modsyms.FromFinder(k.Finder()),
	})
}

// SourceTasks is NeedsError.Source for the task list (Tasks).
const SourceTasks = "tasks"

// x86StackSize is THREAD_SIZE on x86_64: 16 KiB (arch/x86/include/asm/
// page_64_types.h, KASAN_STACK_ORDER 0 in Debian's kernels).
const x86StackSize = 16 << 10

// TaskStack unwinds a task's kernel stack (x86_64 and arm64, so far): a
// task running at the crash from its CPU's registers (the NT_PRSTATUS note
// of its CPU, notes being in CPU order), any other on x86_64 from the
// switch frame at its thread.sp (see tasks.Layout.SwitchFrame) with the
// ORC tables, on arm64 from thread.cpu_context (tasks.Layout.CPUContext)
// with the frame records. On other architectures the Stop's error wraps
// errors.ErrUnsupported.
func (s *Session) TaskStack(t *tasks.Task) Stack {
	arch := s.dump.Arch().Name
	if arch != "x86_64" && arch != "arm64" {
		return Stack{Stop: unwind.Stop{Err: fmt.Errorf("kdumpsyms: task stacks of %s kernels: %w", arch, errors.ErrUnsupported)}}
	}
	list, err := s.Tasks()
	if err != nil {
		return Stack{Stop: unwind.Stop{Err: err}}
	}
	if t.OnCPU {
		cpus := s.dump.CPUs()
		if int(t.CPU) >= len(cpus) {
			return Stack{Stop: unwind.Stop{Err: fmt.Errorf("kdumpsyms: task %d runs on CPU %d, and the dump has %d CPU notes: %w", t.PID, t.CPU, len(cpus), vmcoreinfo.ErrMissingInfo)}}
		}
		return s.Unwind(cpus[t.CPU].Regs)
	}
	kmem, _ := s.Kernel()
	if arch == "arm64" {
		// THREAD_SIZE: 16 KiB, or the page size if larger
		// (arch/arm64/include/asm/memory.h, without KASAN).
		size := max(16<<10, uint64(s.target().PageSize))
		c, err := list.Layout.CPUContext(kmem, s.target(), t, size)
		if err != nil {
			return Stack{Stop: unwind.Stop{Err: err}}
		}
		// The frame-pointer walk of Unwind, from PRSTATUS-shaped
		// registers: x29 (fp), sp (31) and pc (32).
		regs := make([]uint64, 34)
		regs[29], regs[31], regs[32] = c.FP, c.SP, c.PC
		return s.Unwind(regs)
	}
	fr, err := list.Layout.SwitchFrame(kmem, s.target(), t, x86StackSize)
	if err != nil {
		return Stack{Stop: unwind.Stop{Err: err}}
	}
	tab, err := s.ORCTables()
	if err != nil {
		return Stack{Stop: unwind.Stop{Err: err}}
	}
	frames, stop := unwind.ORCSwitched(kmem, fr.IP, fr.SP, fr.BP, tab, unwind.Options{KernelStart: 1 << 63, StackSize: x86StackSize})
	return Stack{Unwinder: "ORC", Frames: frames, Stop: stop}
}
