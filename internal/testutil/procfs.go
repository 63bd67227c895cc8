package testutil

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ProcTask is one task's /proc/PID/task/TID/stat as the guest's /init
// captured it just before the crash (the procstat file of the ground
// truth).
type ProcTask struct {
	PID, TID, PPID, CPU int
	State               byte
	// Comm is the name as /proc prints it: the full name of a kernel
	// thread and a workqueue worker's "-" suffix included
	// (fs/proc/array.c, proc_task_name), where task_struct.comm holds 15
	// bytes at most.
	Comm string
}

// procHeader is busybox head's separator before each file.
var procHeader = regexp.MustCompile(`(?m)^==> /proc/(\d+)/task/(\d+)/(stat|stack) <==\n`)

// ProcTasks returns the captured tasks, and false for a guest whose ground
// truth predates the capture.
func (g *CorpusGuest) ProcTasks(tb testing.TB) ([]ProcTask, bool) {
	tb.Helper()
	b, ok := g.optional(tb, "procstat")
	if !ok {
		return nil, false
	}
	out, err := ParseProcStat(string(b))
	if err != nil {
		tb.Fatalf("testutil: %s/procstat: %v", g.Name, err)
	}
	return out, true
}

// ParseProcStat parses the procstat file: each /proc/PID/task/TID/stat
// line after its "==> PATH <==" header.
func ParseProcStat(text string) ([]ProcTask, error) {
	var out []ProcTask
	for _, sec := range procSections(text) {
		line, _, _ := strings.Cut(sec.body, "\n")
		a, b := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		if a < 0 || b < a || b+2 > len(line) {
			return nil, fmt.Errorf("task %d: bad stat line %q", sec.tid, line)
		}
		f := strings.Fields(line[b+2:])
		// After the comm: state (3), ppid (4), ... processor (39), as
		// proc(5) numbers the fields.
		if len(f) < 37 || len(f[0]) != 1 {
			return nil, fmt.Errorf("task %d: short stat line %q", sec.tid, line)
		}
		ppid, err1 := strconv.Atoi(f[1])
		cpu, err2 := strconv.Atoi(f[36])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("task %d: bad stat line %q", sec.tid, line)
		}
		out = append(out, ProcTask{PID: sec.pid, TID: sec.tid, PPID: ppid, CPU: cpu, State: f[0][0], Comm: line[a+1 : b]})
	}
	return out, nil
}

// ProcStacks returns each captured task's /proc/PID/task/TID/stack, by
// TID, as the function names of its lines ("[<0>] do_wait+0x.../0x..."
// gives "do_wait"); false for a guest whose ground truth predates it.
func (g *CorpusGuest) ProcStacks(tb testing.TB) (map[int][]string, bool) {
	tb.Helper()
	b, ok := g.optional(tb, "procstack")
	if !ok {
		return nil, false
	}
	out := map[int][]string{}
	for _, sec := range procSections(string(b)) {
		var fns []string
		for line := range strings.SplitSeq(strings.TrimSpace(sec.body), "\n") {
			_, rest, ok := strings.Cut(line, "] ")
			if !ok {
				continue
			}
			name, _, _ := strings.Cut(rest, "+")
			fns = append(fns, name)
		}
		out[sec.tid] = fns
	}
	return out, true
}

type procSection struct {
	pid, tid int
	body     string
}

func procSections(text string) []procSection {
	var out []procSection
	idx := procHeader.FindAllStringSubmatchIndex(text, -1)
	for i, m := range idx {
		end := len(text)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		pid, _ := strconv.Atoi(text[m[2]:m[3]])
		tid, _ := strconv.Atoi(text[m[4]:m[5]])
		out = append(out, procSection{pid, tid, text[m[1]:end]})
	}
	return out
}
