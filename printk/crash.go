package printk

import (
	"strconv"
	"strings"
)

// Crash is the report of a panic or oops found in the log.
type Crash struct {
	// Start and End index the records of the report in the slice given to
	// FindCrash: [Start, End), End being the end of the log.
	Start, End int
	// Message is the panic line ("Kernel panic - not syncing: …") or,
	// without one, the first line of the oops.
	Message string
	// Panicked says the log holds a "Kernel panic - not syncing" line.
	Panicked bool
	// CPU, PID and Comm are from the report's "CPU: N PID: P Comm: C"
	// line (dump_stack's header); CPU and PID are -1 without it.
	CPU, PID int
	Comm     string
}

const (
	panicPrefix = "Kernel panic - not syncing"
	// reportWindow bounds how far before the panic line the start of the
	// report is looked for: an oops with a long call trace and register
	// dump is about 60 records; 300 leaves room for module lists and
	// several CPUs' backtraces.
	reportWindow = 300
	// startSpread is how far apart the opening lines of one report can be:
	// arm64 prints "Unable to handle kernel …" about 15 records before
	// "Internal error: Oops", x86 "------------[ cut here ]------------"
	// just before "kernel BUG at"; two separate oopses are further apart.
	startSpread = 40
)

// reportStarts open a report: what die(), BUG(), WARN(), the page fault
// handlers, the lockup detectors and sysrq print first.
var reportStarts = []string{
	"BUG: ",
	"kernel BUG at ",
	"Unable to handle kernel ",
	"general protection fault",
	"Internal error: ",
	"------------[ cut here ]------------",
	"WARNING: ",
	"watchdog: BUG: ",
	"INFO: task ",
	"sysrq: Trigger a crash",
	"Oops: ",
	"Oops - ",
}

func isReportStart(text string) bool {
	for _, p := range reportStarts {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// FindCrash finds the report of the last panic in recs (the records of the
// log, oldest first), or without a panic line the last oops, and reads the
// crashing CPU, task and command from its "CPU: … PID: … Comm: …" line.
// It returns false when the log holds neither.
//
// The start of the report is found by the lines that open one (see
// reportStarts): the last such line within reportWindow records before
// the panic, moved back over other opening lines less than startSpread
// records before it.
func FindCrash(recs []Record) (*Crash, bool) {
	c := &Crash{CPU: -1, PID: -1, End: len(recs)}
	p := -1
	for i := len(recs) - 1; i >= 0; i-- {
		if strings.HasPrefix(recs[i].Text, panicPrefix) {
			p = i
			break
		}
	}
	start := -1
	from := len(recs) - 1
	if p >= 0 {
		c.Panicked, c.Message = true, firstLine(recs[p].Text)
		start, from = p, p-1
	}
	lo := 0
	if p >= 0 {
		lo = max(0, p-reportWindow)
	}
	for i := from; i >= lo; i-- {
		if isReportStart(recs[i].Text) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, false
	}
	for moved := true; moved; {
		moved = false
		for i := start - 1; i >= max(lo, start-startSpread); i-- {
			if isReportStart(recs[i].Text) {
				start, moved = i, true
				break
			}
		}
	}
	c.Start = start
	if !c.Panicked {
		c.Message = firstLine(recs[start].Text)
	}
	for i := start; i < len(recs); i++ {
		if cpu, pid, comm, ok := parseCPULine(recs[i].Text); ok {
			c.CPU, c.PID, c.Comm = cpu, pid, comm
			break
		}
	}
	return c, true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// parseCPULine reads dump_stack's header: "CPU: 0 PID: 1 Comm: init Not
// tainted …", with "UID: 0 " after the CPU from 6.12 on.
func parseCPULine(s string) (cpu, pid int, comm string, ok bool) {
	rest, ok := strings.CutPrefix(s, "CPU: ")
	if !ok {
		return 0, 0, "", false
	}
	f := strings.Fields(rest)
	if len(f) < 5 {
		return 0, 0, "", false
	}
	cpu, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0, "", false
	}
	f = f[1:]
	if f[0] == "UID:" && len(f) >= 6 {
		f = f[2:]
	}
	if f[0] != "PID:" || f[2] != "Comm:" {
		return 0, 0, "", false
	}
	pid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, "", false
	}
	return cpu, pid, f[3], true
}
