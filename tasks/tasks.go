package tasks

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Task is one task (a thread; a process is its thread group leader) as
// /proc/PID/stat shows it.
type Task struct {
	// Addr is the address of the task_struct.
	Addr uint64
	// PID is the task's (thread's) ID, TGID its thread group's (the
	// process ID); both 0 for the idle tasks.
	PID, TGID int32
	// PPID is the thread group ID of real_parent, as /proc/PID/stat's
	// ppid (0 for init_task's children); Parent is real_parent, the
	// task_struct's address.
	PPID   int32
	Parent uint64
	// Comm is the task's name, up to its NUL.
	Comm string
	// State is the letter /proc/PID/stat prints (see StateLetter); RawState
	// and ExitState the words it comes from.
	State     byte
	RawState  uint64
	ExitState uint64
	// CPU is the CPU the task last ran on (task_cpu), OnCPU whether it was
	// running on it at the crash (task_struct.on_cpu).
	CPU   uint32
	OnCPU bool
	// OnRQ says the task is queued on a runqueue (task_struct.on_rq):
	// state R and not on a CPU is a task woken and waiting for one.
	// False where the layout has no on_rq.
	OnRQ bool
	// Flags are the PF_* flags.
	Flags uint32
	// Stack is the base of the task's kernel stack (task_struct.stack).
	// (The stack pointer saved when it was last switched out is read by
	// Layout.SwitchFrame and Layout.CPUContext, for the tasks whose stack
	// is asked for: it lies at the end of task_struct, a page apart.)
	Stack uint64
	// Idle says the task is a CPU's idle task (PID 0).
	Idle bool
}

// Kernel reports whether the task is a kernel thread (PF_KTHREAD).
func (t *Task) Kernel() bool { return t.Flags&pfKthread != 0 }

// pfKthread is PF_KTHREAD, include/linux/sched.h.
const pfKthread = 0x00200000

// Options are the inputs of List besides kernel memory.
type Options struct {
	// Target is the machine: byte order and pointer size are needed.
	Target memory.Target
	// Layout is where the fields are (see NewLayout).
	Layout *Layout
	// Symbol returns the address of a kernel symbol: init_task is needed;
	// runqueues, __per_cpu_offset and nr_cpu_ids give the other CPUs' idle
	// tasks.
	Symbol func(name string) (uint64, bool)
	// MaxTasks bounds the tasks read; 0 means DefaultMaxTasks.
	MaxTasks int
}

// DefaultMaxTasks is the default bound on the tasks read: the kernel's
// PID_MAX_LIMIT (include/linux/threads.h, 4M on 64-bit) is far more than
// a dump at hand holds, 1M tasks is 1 GiB of task_structs.
const DefaultMaxTasks = 1 << 20

// maxCPUs bounds the CPUs whose idle task is read (NR_CPUS is at most 8192
// on any architecture's Kconfig).
const maxCPUs = 8192

// ErrCorrupt means the task lists are damaged: a list that loops, a field
// that is no value a kernel stores there.
var ErrCorrupt = memory.Classed("corrupt task list", memory.ErrCorrupt)

// Problem is one cause of failure met while listing tasks, with how many
// tasks (or list nodes) it concerned and the first of them.
type Problem struct {
	What  string // "reading task_struct", "comm not printable", ...
	Addr  uint64 // the first task_struct (or list node) concerned
	Count int
	Err   error // the first error of this cause
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("tasks: %s at %#x", p.What, p.Addr)
	if p.Count > 1 {
		s += fmt.Sprintf(" (and %d more)", p.Count-1)
	}
	if p.Err != nil {
		s += ": " + p.Err.Error()
	}
	return s
}

func (p *Problem) Unwrap() error { return p.Err }

// List is every task read, in the order found: the idle task of each CPU,
// then each thread group from init_task.tasks with its threads, the leader
// first.
type List struct {
	Tasks []Task
	// Layout is the layout the tasks were read with (see
	// Layout.SwitchFrame).
	Layout *Layout
	// Problems are the causes of failure, once each, in the order met.
	Problems []*Problem
}

// Err returns the problems joined, or nil.
func (l *List) Err() error {
	errs := make([]error, len(l.Problems))
	for i, p := range l.Problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// walker holds one listing's state.
type walker struct {
	mem    memory.Reader
	opt    Options
	l      *Layout
	out    *List
	seen   map[uint64]bool // task_structs listed
	byWhat map[string]*Problem
	buf    []byte
	max    int
	full   bool
	// steps counts the list nodes followed, in every list: each task is
	// on two lists (its group's on init_task.tasks, itself on its
	// group's threads), so more than stepsPerTask*max is lists that lead
	// back to tasks already seen, stopped (over) lest the work grow with
	// the square of the tasks.
	steps int
	over  bool
}

// stepsPerTask bounds the list nodes followed per task allowed.
const stepsPerTask = 4

// Read lists the tasks of the kernel in mem. It returns an error only when
// it can list nothing (no layout, no init_task, an unknown target);
// otherwise a List with every task it could read and its Problems.
func Read(mem memory.Reader, opt Options) (*List, error) {
	if err := opt.Target.Check(); err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	if opt.Layout == nil {
		return nil, errors.New("tasks: no layout")
	}
	if opt.Symbol == nil {
		return nil, fmt.Errorf("tasks: no symbols to find init_task: %w", vmcoreinfo.ErrMissingInfo)
	}
	init, ok := opt.Symbol("init_task")
	if !ok {
		return nil, fmt.Errorf("tasks: symbol init_task: %w", vmcoreinfo.ErrMissingInfo)
	}
	w := &walker{mem: mem, opt: opt, l: opt.Layout, out: &List{Layout: opt.Layout}, seen: map[uint64]bool{},
		byWhat: map[string]*Problem{}, buf: make([]byte, opt.Layout.hi-opt.Layout.lo), max: opt.MaxTasks}
	if w.max <= 0 {
		w.max = DefaultMaxTasks
	}
	w.idle(init)
	w.groups(init)
	w.parents()
	return w.out, nil
}

// problem records one failure under its cause.
func (w *walker) problem(what string, addr uint64, err error) {
	if p := w.byWhat[what]; p != nil {
		p.Count++
		return
	}
	p := &Problem{What: what, Addr: addr, Count: 1, Err: err}
	w.byWhat[what] = p
	w.out.Problems = append(w.out.Problems, p)
}

func (w *walker) ptr(addr uint64) (uint64, error) {
	bo := w.opt.Target.ByteOrder
	if w.opt.Target.PtrSize == 4 {
		v, err := memory.Uint32(w.mem, bo, addr)
		return uint64(v), err
	}
	return memory.Uint64(w.mem, bo, addr)
}

// uint reads an unsigned integer of f.size bytes at f.off in b (the span
// read at l.lo).
func (w *walker) uint(b []byte, f field) uint64 {
	p := b[f.off-w.l.lo : f.off-w.l.lo+f.size]
	bo := w.opt.Target.ByteOrder
	switch f.size {
	case 8:
		return bo.Uint64(p)
	case 4:
		return uint64(bo.Uint32(p))
	case 2:
		return uint64(bo.Uint16(p))
	case 1:
		return uint64(p[0])
	}
	return 0
}

// task reads the task_struct at addr and adds it, unless it was listed
// already. It returns the words the walk follows: the task's tasks.next
// and signal.
func (w *walker) task(addr uint64, idle bool) (t *Task, err error) {
	if w.seen[addr] {
		return nil, nil
	}
	if len(w.out.Tasks) >= w.max {
		if !w.full {
			w.full = true
			w.problem(fmt.Sprintf("more than %d tasks: the rest not read", w.max), addr, ErrCorrupt)
		}
		return nil, errFull
	}
	l := w.l
	if err := memory.ReadFull(w.mem, w.buf, addr+l.lo); err != nil {
		w.problem("reading task_struct", addr, err)
		return nil, err
	}
	w.seen[addr] = true
	b := w.buf
	st, ex := w.uint(b, l.state), w.uint(b, l.exitState)
	tk := Task{
		Addr:      addr,
		PID:       int32(w.uint(b, l.pid)),
		TGID:      int32(w.uint(b, l.tgid)),
		RawState:  st,
		ExitState: ex,
		State:     StateLetter(st, ex),
		CPU:       uint32(w.uint(b, l.cpu)),
		OnCPU:     w.uint(b, l.onCPU) != 0,
		OnRQ:      l.onRQ.size != 0 && w.uint(b, l.onRQ) != 0,
		Flags:     uint32(w.uint(b, l.flags)),
		Stack:     w.uint(b, l.stack),
		Parent:    w.uint(b, l.realParent),
		Idle:      idle,
	}
	comm := b[l.comm.off-l.lo : l.comm.off-l.lo+l.comm.size]
	n := slices.Index(comm, 0)
	if n < 0 {
		w.problem("comm not NUL-terminated", addr, ErrCorrupt)
		n = len(comm)
	}
	tk.Comm = string(comm[:n])
	if !printable(tk.Comm) {
		w.problem("comm not printable", addr, fmt.Errorf("%q: %w", tk.Comm, ErrCorrupt))
	}
	w.out.Tasks = append(w.out.Tasks, tk)
	return &w.out.Tasks[len(w.out.Tasks)-1], nil
}

var errFull = errors.New("task limit reached")

// printable reports whether s is a name ps would print as is: no control
// characters, valid UTF-8 not required (comm is bytes).
func printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// idle adds the idle task of each CPU: init_task (CPU 0's) and, where the
// symbols and struct rq are known, per_cpu(runqueues, cpu).idle of the
// others (kernel/sched/core.c init_idle sets rq->idle for each possible
// CPU's idle thread, which fork_idle leaves off every list).
func (w *walker) idle(init uint64) {
	w.task(init, true)
	sym := w.opt.Symbol
	rq, ok1 := sym("runqueues")
	offs, ok2 := sym("__per_cpu_offset")
	ncpu, ok3 := sym("nr_cpu_ids")
	if !ok1 || !ok2 || !ok3 || w.l.rqIdle.size == 0 {
		return // a uniprocessor kernel, or no rq layout: CPU 0's only
	}
	n, err := memory.Uint32(w.mem, w.opt.Target.ByteOrder, ncpu)
	if err != nil {
		w.problem("reading nr_cpu_ids", ncpu, err)
		return
	}
	if n > maxCPUs {
		w.problem("nr_cpu_ids out of range", ncpu, fmt.Errorf("%d CPUs: %w", n, ErrCorrupt))
		return
	}
	ps := uint64(w.opt.Target.PtrSize)
	for cpu := uint64(0); cpu < uint64(n); cpu++ {
		off, err := w.ptr(offs + cpu*ps)
		if err != nil {
			w.problem("reading __per_cpu_offset", offs+cpu*ps, err)
			return
		}
		t, err := w.ptr(rq + off + w.l.rqIdle.off)
		if err != nil {
			w.problem("reading runqueues.idle", rq+off, err)
			continue
		}
		if t == 0 {
			continue
		}
		if tk, _ := w.task(t, true); tk != nil && (tk.PID != 0 || !tk.Kernel()) {
			w.problem("runqueues.idle is no idle task", t, fmt.Errorf("pid %d, flags %#x: %w", tk.PID, tk.Flags, ErrCorrupt))
		}
	}
}

// list walks the circular list at head (a list_head) and calls f with
// each node's address until it is back at head, a node repeats, or f says
// stop. A node that cannot be followed (f says its struct could not be
// read, or its next pointer cannot be) breaks the walk forwards, which is
// then retried backwards from head (through prev) to recover the nodes
// beyond the break, up to the first node the forward walk saw. what names
// the list for problems.
func (w *walker) list(head uint64, what string, f func(node uint64) (ok, stop bool)) {
	walk := func(step uint64, other, mine map[uint64]bool) (broke bool) {
		at := head
		node, err := w.ptr(head + step)
		for err == nil && node != head {
			if w.steps++; w.steps > stepsPerTask*w.max {
				if !w.over {
					w.over = true
					w.problem(fmt.Sprintf("more than %d list nodes followed: the lists lead back to tasks already seen", stepsPerTask*w.max), node, ErrCorrupt)
				}
				return false
			}
			if other[node] {
				return false // met the walk from the other end
			}
			if mine[node] {
				w.problem(what+" loops", node, ErrCorrupt)
				return false
			}
			if len(mine) > w.max {
				return false
			}
			mine[node] = true
			ok, stop := f(node)
			if stop {
				return false
			}
			if !ok {
				return true // the node's struct could not be read: reported
			}
			at = node
			node, err = w.ptr(node + step)
		}
		if err != nil {
			w.problem("following "+what, at, err)
			return true
		}
		return false
	}
	fwd := map[uint64]bool{}
	if walk(0, nil, fwd) {
		walk(uint64(w.opt.Target.PtrSize), fwd, map[uint64]bool{})
	}
}

// groups adds every thread group on init_task.tasks with its threads.
func (w *walker) groups(init uint64) {
	l := w.l
	w.threads(init)
	w.list(init+l.tasks.off, "init_task.tasks", func(node uint64) (bool, bool) {
		leader := node - l.tasks.off
		_, err := w.task(leader, false)
		if err == errFull {
			return false, true
		}
		if err != nil {
			return false, false
		}
		w.threads(leader)
		return true, w.full
	})
}

// threads adds the threads of leader's thread group (signal->thread_head,
// linked through task_struct.thread_node; kernel/fork.c copy_process).
func (w *walker) threads(leader uint64) {
	l := w.l
	sig, err := w.ptr(leader + l.signal.off)
	if err != nil || sig == 0 {
		if err == nil {
			err = fmt.Errorf("signal is NULL: %w", ErrCorrupt)
		}
		w.problem("reading task_struct.signal", leader, err)
		return
	}
	w.list(sig+l.threadHead.off, "signal_struct.thread_head", func(node uint64) (bool, bool) {
		_, err := w.task(node-l.threadNode.off, false)
		return err == nil, err == errFull
	})
}

// parents fills in PPID: the thread group ID of each task's real_parent,
// from the tasks listed or, failing that, read (the task_structs were read
// already: a second pass through the page cache of a compressed dump
// would decompress their pages again).
func (w *walker) parents() {
	tgid := make(map[uint64]int32, len(w.out.Tasks))
	for _, t := range w.out.Tasks {
		tgid[t.Addr] = t.TGID
	}
	for i := range w.out.Tasks {
		t := &w.out.Tasks[i]
		if t.Idle {
			continue // /proc shows no idle task; its real_parent is itself
		}
		p := t.Parent
		if g, ok := tgid[p]; ok {
			t.PPID = g
			continue
		}
		g, err := memory.Uint32(w.mem, w.opt.Target.ByteOrder, p+w.l.tgid.off)
		if err != nil {
			w.problem("reading the real_parent's tgid", t.Addr, err)
			continue
		}
		t.PPID = int32(g)
	}
}
