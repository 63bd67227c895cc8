package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/kdumpsyms/kdumpsyms/tasks"
)

func cmdPs(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("ps", "ps [flags] VMCORE")
	c.register(fs)
	c.lazy = true // a few symbols by name: decode on demand
	fs.Lookup("lazy").DefValue = "true"
	format := fs.String("format", "text", "output `format`: text (like ps) or json (one task a line)")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("ps: want one VMCORE")
	}
	if *format != "text" && *format != "json" {
		return usagef("ps: unknown format %q (want text or json)", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	list, err := s.Tasks()
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(stdout, 64<<10)
	err = s.Phase("output", func() error {
		if *format == "json" {
			enc := json.NewEncoder(bw)
			for i := range list.Tasks {
				if err := enc.Encode(psJSON(&list.Tasks[i])); err != nil {
					return err
				}
			}
		} else {
			fmt.Fprintf(bw, "%s %7s %7s %4s %2s %-18s %s\n", " ", "PID", "PPID", "CPU", "ST", "TASK", "COMM")
			for i := range list.Tasks {
				writePsLine(bw, &list.Tasks[i])
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	if len(list.Problems) > 0 {
		for _, p := range list.Problems {
			fmt.Fprintf(stderr, "kdump-syms: ps: %v\n", p)
		}
		return exitCode(exitPartial)
	}
	return nil
}

// writePsLine prints one task: ">" for a task on its CPU at the crash,
// kernel threads' names in brackets as ps prints them.
func writePsLine(w io.Writer, t *tasks.Task) {
	mark := " "
	if t.OnCPU {
		mark = ">"
	}
	comm := t.Comm
	if !printableName(comm) {
		comm = strconv.Quote(comm)
	}
	if t.Kernel() {
		comm = "[" + comm + "]"
	}
	fmt.Fprintf(w, "%s %7d %7d %4d %2c %#-18x %s\n", mark, t.PID, t.PPID, t.CPU, t.State, t.Addr, comm)
}

func printableName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// psTask is the JSON form of one task.
type psTask struct {
	PID    int32  `json:"pid"`
	TGID   int32  `json:"tgid"`
	PPID   int32  `json:"ppid"`
	CPU    uint32 `json:"cpu"`
	State  string `json:"state"`
	Comm   string `json:"comm"`
	OnCPU  bool   `json:"on_cpu"`
	OnRQ   bool   `json:"on_rq"`
	Kernel bool   `json:"kernel_thread"`
	Idle   bool   `json:"idle"`
	Task   string `json:"task"`
	Stack  string `json:"stack"`
	Flags  string `json:"flags"`
}

func psJSON(t *tasks.Task) psTask {
	return psTask{
		PID: t.PID, TGID: t.TGID, PPID: t.PPID, CPU: t.CPU, State: string(t.State), Comm: t.Comm,
		OnCPU: t.OnCPU, OnRQ: t.OnRQ, Kernel: t.Kernel(), Idle: t.Idle,
		Task: fmt.Sprintf("%#x", t.Addr), Stack: fmt.Sprintf("%#x", t.Stack), Flags: fmt.Sprintf("%#x", t.Flags),
	}
}
