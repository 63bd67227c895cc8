package tasks

import (
	"fmt"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
)

// field is one member the walk reads: its offset from the start of the
// outer struct and its size in bytes.
type field struct {
	name      string
	off, size uint64
}

// Layout is where the walk finds each field of task_struct and
// signal_struct, from a layout source.
type Layout struct {
	// Source describes where the layout came from.
	Source string

	tasks, pid, tgid, comm, state, exitState, realParent field
	onCPU, stack, cpu, flags, signal, threadNode         field
	threadHead                                           field // in signal_struct
	// sp is thread.sp (x86_64's saved kernel stack pointer); size 0 when
	// the layout has none.
	sp field
	// rqIdle is struct rq's idle; size 0 when the layout has none.
	rqIdle field
	// onRQ is task_struct.on_rq; size 0 when the layout has none.
	onRQ field
	// frameBP and frameRet are struct inactive_task_frame's bp and
	// ret_addr, frameSize its size (x86; 0 where the layout has none).
	frameBP, frameRet field
	frameSize         uint64
	// ctxFP, ctxSP and ctxPC are thread.cpu_context.{fp,sp,pc} (arm64;
	// size 0 where the layout has none).
	ctxFP, ctxSP, ctxPC field
	// span is [lo, hi): the bytes of task_struct that hold every field
	// but thread.sp, read in one piece.
	lo, hi uint64
}

// maxSpan bounds the part of a task_struct read at once: 6.x's whole
// struct is about 10 KiB.
const maxSpan = 64 << 10

// NewLayout finds the fields the walk reads in src. A struct or field
// src lacks is an error naming it, wrapping btflayout.ErrNotFound.
//
// task_struct's state is __state since 5.14 (state before), its CPU
// task_struct.cpu since 5.16 on the architectures with
// THREAD_INFO_IN_TASK (thread_info.cpu before), kernel/sched and
// include/linux/sched.h.
func NewLayout(src btflayout.Source) (*Layout, error) {
	if src == nil {
		return nil, fmt.Errorf("tasks: no layout source: %w", btflayout.ErrNotFound)
	}
	ts, err := src.Struct("task_struct")
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	l := &Layout{Source: src.Describe()}
	get := func(s *btflayout.Struct, name string, size ...uint64) (field, error) {
		f, err := s.MustField(name)
		if err != nil {
			return field{}, fmt.Errorf("tasks: %w", err)
		}
		sz := f.Size
		if len(size) > 0 && !slices.Contains(size, sz) {
			return field{}, fmt.Errorf("tasks: %s.%s is %d bytes, not %d: %w", s.Name, name, sz, size[0], btflayout.ErrCorrupt)
		}
		return field{name, f.Offset, sz}, nil
	}
	var errs []error
	set := func(dst *field, s *btflayout.Struct, name string, size ...uint64) {
		f, err := get(s, name, size...)
		if err != nil {
			errs = append(errs, err)
		}
		*dst = f
	}
	set(&l.tasks, ts, "tasks", 16, 8)
	set(&l.pid, ts, "pid", 4)
	set(&l.tgid, ts, "tgid", 4)
	set(&l.comm, ts, "comm", 16)
	if _, ok := ts.Field("__state"); ok {
		set(&l.state, ts, "__state", 4)
	} else {
		set(&l.state, ts, "state", 8, 4)
	}
	set(&l.exitState, ts, "exit_state", 4)
	set(&l.realParent, ts, "real_parent", 8, 4)
	set(&l.onCPU, ts, "on_cpu", 4, 1) // int, a u8 in 7.x
	set(&l.stack, ts, "stack", 8, 4)
	set(&l.flags, ts, "flags", 4)
	set(&l.signal, ts, "signal", 8, 4)
	set(&l.threadNode, ts, "thread_node", 16, 8)
	if _, ok := ts.Field("cpu"); ok {
		set(&l.cpu, ts, "cpu", 4)
	} else if ti, ok := ts.Field("thread_info"); ok {
		tis, err := src.Struct("thread_info", "cpu")
		if err != nil {
			errs = append(errs, fmt.Errorf("tasks: task_struct has no cpu, and thread_info: %w", err))
		} else {
			f, err := get(tis, "cpu", 4)
			if err != nil {
				errs = append(errs, err)
			}
			l.cpu = field{"thread_info.cpu", ti.Offset + f.off, f.size}
		}
	} else {
		errs = append(errs, fmt.Errorf("tasks: struct task_struct has neither cpu nor thread_info: %w", btflayout.ErrNotFound))
	}
	if ss, err := src.Struct("signal_struct", "thread_head"); err != nil {
		errs = append(errs, fmt.Errorf("tasks: %w", err))
	} else {
		set(&l.threadHead, ss, "thread_head", 16, 8)
	}
	if len(errs) > 0 {
		return nil, joinLayout(errs)
	}
	// Optional: thread.sp (x86_64) for the stacks, rq.idle for the idle
	// tasks of the other CPUs.
	if th, ok := ts.Field("thread"); ok && th.TypeName != "" {
		if tss, err := src.Struct(th.TypeName, "sp"); err == nil {
			if f, err := get(tss, "sp", 8, 4); err == nil {
				l.sp = field{"thread.sp", th.Offset + f.off, f.size}
			}
		}
	}
	if fr, err := src.Struct("inactive_task_frame", "bp", "ret_addr"); err == nil && fr.Size != 0 {
		bp, err1 := get(fr, "bp", 8)
		ret, err2 := get(fr, "ret_addr", 8)
		if err1 == nil && err2 == nil && bp.off+8 <= fr.Size && ret.off+8 <= fr.Size {
			l.frameBP, l.frameRet, l.frameSize = bp, ret, fr.Size
		}
	}
	if f, err := get(ts, "on_rq", 4, 1); err == nil {
		l.onRQ = f
	}
	if th, ok := ts.Field("thread"); ok && th.TypeName != "" {
		if tss, err := src.Struct(th.TypeName, "cpu_context"); err == nil {
			cc, _ := tss.Field("cpu_context")
			if ccs, err := src.Struct(cc.TypeName, "fp", "sp", "pc"); cc.TypeName != "" && err == nil {
				fp, err1 := get(ccs, "fp", 8)
				sp, err2 := get(ccs, "sp", 8)
				pc, err3 := get(ccs, "pc", 8)
				if err1 == nil && err2 == nil && err3 == nil {
					at := th.Offset + cc.Offset
					l.ctxFP = field{"thread.cpu_context.fp", at + fp.off, 8}
					l.ctxSP = field{"thread.cpu_context.sp", at + sp.off, 8}
					l.ctxPC = field{"thread.cpu_context.pc", at + pc.off, 8}
				}
			}
		}
	}
	if rq, err := src.Struct("rq", "idle"); err == nil {
		if f, err := get(rq, "idle", 8, 4); err == nil {
			l.rqIdle = f
		}
	}
	l.lo, l.hi = ^uint64(0), 0
	for _, f := range []field{l.tasks, l.pid, l.tgid, l.comm, l.state, l.exitState, l.realParent,
		l.onCPU, l.stack, l.cpu, l.flags, l.signal, l.threadNode, l.onRQ} {
		if f.size == 0 {
			continue
		}
		l.lo = min(l.lo, f.off)
		l.hi = max(l.hi, f.off+f.size)
	}
	if l.hi-l.lo > maxSpan {
		return nil, fmt.Errorf("tasks: task_struct fields span %d bytes (more than %d): %w", l.hi-l.lo, maxSpan, btflayout.ErrCorrupt)
	}
	return l, nil
}

func joinLayout(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	e := errs[0]
	for _, x := range errs[1:] {
		e = fmt.Errorf("%w; %w", e, x)
	}
	return e
}
