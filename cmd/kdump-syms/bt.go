package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/tasks"
)

func cmdBt(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("bt", "bt [flags] VMCORE [PID...]")
	c.register(fs)
	c.lazy = true
	fs.Lookup("lazy").DefValue = "true"
	format := fs.String("format", "text", "output `format`: text (identical stacks grouped) or json (one task a line)")
	all := fs.Bool("all", false, "every task (the default when no PID and no --state is given)")
	state := fs.String("state", "", "only the tasks in these states (letters as ps prints them, e.g. D or DR)")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("bt: no VMCORE given")
	}
	if *format != "text" && *format != "json" {
		return usagef("bt: unknown format %q (want text or json)", *format)
	}
	var pids []int32
	for _, a := range pos[1:] {
		n, err := strconv.ParseInt(a, 10, 32)
		if err != nil || n < 0 {
			return usagef("bt: %q is no PID", a)
		}
		pids = append(pids, int32(n))
	}
	if *all && len(pids) > 0 {
		return usagef("bt: --all and PIDs both given")
	}
	s, err := c.open(pos[:1], stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	list, err := s.Tasks()
	if err != nil {
		return err
	}
	var sel []*tasks.Task
	found := map[int32]bool{}
	for i := range list.Tasks {
		t := &list.Tasks[i]
		if len(pids) > 0 && !slices.Contains(pids, t.PID) {
			continue
		}
		if *state != "" && !strings.ContainsRune(*state, rune(t.State)) {
			continue
		}
		found[t.PID] = true
		sel = append(sel, t)
	}
	partial := len(list.Problems) > 0
	for _, p := range list.Problems {
		fmt.Fprintf(stderr, "kdump-syms: bt: %v\n", p)
	}
	for _, p := range pids {
		if !found[p] {
			fmt.Fprintf(stderr, "kdump-syms: bt: no task %d in the dump\n", p)
			partial = true
		}
	}
	digits, _ := addrShape(s)
	bw := bufio.NewWriterSize(stdout, 64<<10)
	stops := map[string]int{}
	err = s.Phase("output", func() error {
		var groups []*btGroup
		byKey := map[string]*btGroup{}
		for _, t := range sel {
			bt := taskStack(s, t, digits)
			if bt.err != "" {
				stops[bt.err]++
			}
			if *format == "json" {
				if err := json.NewEncoder(bw).Encode(bt.js); err != nil {
					return err
				}
				continue
			}
			key := bt.key()
			g := byKey[key]
			if g == nil {
				g = &btGroup{bt: bt}
				byKey[key] = g
				groups = append(groups, g)
			}
			g.tasks = append(g.tasks, t)
		}
		for _, g := range groups {
			g.write(bw)
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	for why, n := range stops {
		fmt.Fprintf(stderr, "kdump-syms: bt: %d task(s) not unwound: %s\n", n, why)
		partial = true
	}
	if partial {
		return exitCode(exitPartial)
	}
	return nil
}

// btTask is one task's stack, in JSON form and for grouping.
type btTask struct {
	js  btJSON
	err string // why the stack was not unwound at all
}

type btJSON struct {
	PID      int32   `json:"pid"`
	TGID     int32   `json:"tgid"`
	PPID     int32   `json:"ppid"`
	CPU      uint32  `json:"cpu"`
	State    string  `json:"state"`
	Comm     string  `json:"comm"`
	OnCPU    bool    `json:"on_cpu"`
	Task     string  `json:"task"`
	Unwinder string  `json:"unwinder,omitempty"`
	Frames   []frame `json:"frames"`
	Stop     string  `json:"stop"`
}

func taskStack(s *kdumpsyms.Session, t *tasks.Task, digits int) btTask {
	st := s.TaskStack(t)
	bt := btTask{js: btJSON{PID: t.PID, TGID: t.TGID, PPID: t.PPID, CPU: t.CPU, State: string(t.State), Comm: t.Comm,
		OnCPU: t.OnCPU, Task: fmt.Sprintf("%#x", t.Addr), Unwinder: st.Unwinder, Frames: []frame{}}}
	if st.Unwinder == "" {
		bt.js.Stop = fmt.Sprintf("not unwound: %v", st.Stop.Err)
		bt.err = fmt.Sprint(st.Stop.Err)
		return bt
	}
	bt.js.Stop = st.Stop.String()
	for _, f := range st.Frames {
		fr := frame{PC: fmt.Sprintf("%0*x", digits, f.PC)}
		if f.Regs != 0 {
			fr.ExceptionFrame = fmt.Sprintf("%0*x", digits, f.Regs)
		}
		if sym, err := s.Chain().Lookup(f.PC); err == nil {
			fr.Symbol = sym.Format(f.PC)
		}
		if r := f.Recovered; r != nil {
			fr.FoundBy = fmt.Sprintf("%s: %s", r.Method, r)
		}
		bt.js.Frames = append(bt.js.Frames, fr)
	}
	return bt
}

// key is what makes two stacks the same for grouping: the frames and how
// the walk stopped.
func (b btTask) key() string {
	var sb strings.Builder
	for _, f := range b.js.Frames {
		sb.WriteString(f.PC)
		sb.WriteByte(' ')
	}
	sb.WriteString(b.js.Stop)
	return sb.String()
}

type btGroup struct {
	bt    btTask
	tasks []*tasks.Task
}

func (g *btGroup) write(w io.Writer) {
	if len(g.tasks) == 1 {
		t := g.tasks[0]
		fmt.Fprintf(w, "PID %d (%s) state %c CPU %d%s task %#x:\n", t.PID, t.Comm, t.State, t.CPU, onCPUText(t), t.Addr)
	} else {
		states := map[byte]int{}
		var names []string
		for _, t := range g.tasks {
			states[t.State]++
			names = append(names, fmt.Sprintf("%d (%s)", t.PID, t.Comm))
		}
		var st []string
		for _, c := range "RSDTtXZPI" {
			if n := states[byte(c)]; n > 0 {
				st = append(st, fmt.Sprintf("%d %c", n, c))
			}
		}
		fmt.Fprintf(w, "%d tasks (%s): %s:\n", len(g.tasks), strings.Join(st, ", "), strings.Join(names, ", "))
	}
	if g.bt.js.Unwinder == "" {
		fmt.Fprintf(w, "  %s\n\n", g.bt.js.Stop)
		return
	}
	for _, f := range g.bt.js.Frames {
		if f.ExceptionFrame != "" {
			fmt.Fprintf(w, "   -- exception frame, pt_regs at %s --\n", f.ExceptionFrame)
		}
		if f.FoundBy != "" {
			fmt.Fprintf(w, "   -- next frame found by %s\n", f.FoundBy)
		}
		if f.Symbol != "" {
			fmt.Fprintf(w, "   %s\n", f.Symbol)
		} else {
			fmt.Fprintf(w, "   0x%s\n", f.PC)
		}
	}
	fmt.Fprintf(w, "  stopped: %s\n\n", g.bt.js.Stop)
}

func onCPUText(t *tasks.Task) string {
	if t.OnCPU {
		return " (running)"
	}
	return ""
}
