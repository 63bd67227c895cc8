// Package crash tells what a dump says of the crash it was taken for: the
// panic or oops report in the kernel log, the crashing CPU, task and
// command that report names, and which of the dump's CPU register notes
// (NT_PRSTATUS) is that CPU's — the facts a triage tool starts from.
//
// It reads the log through package printk and takes the notes' pr_pid
// values as given; it imports no container package.
package crash

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/printk"
)

// Facts is what the dump says of its crash.
type Facts struct {
	// Report is the last panic (or, without one, the last oops) report in
	// the log, with its message and its "CPU: N PID: P Comm: C" line; nil
	// when the log holds none or could not be read (LogErr).
	Report *printk.Crash
	// Records are the report's records, oldest first.
	Records []printk.Record
	// LogErr says why the log could not be read; nil when it was.
	LogErr error
	// Note is the index of the crashing CPU's register note among the
	// notes given to Find; -1 when it cannot be told. How says how it was
	// told.
	Note int
	How  string
}

// CPU returns the crashing CPU's number from the report, -1 unknown.
func (f *Facts) CPU() int {
	if f.Report == nil {
		return -1
	}
	return f.Report.CPU
}

// PID returns the crashing task's PID from the report, -1 unknown.
func (f *Facts) PID() int {
	if f.Report == nil {
		return -1
	}
	return f.Report.PID
}

// Comm returns the crashing task's command from the report, "" unknown.
func (f *Facts) Comm() string {
	if f.Report == nil {
		return ""
	}
	return f.Report.Comm
}

// Find reads the crash report from log (nil with logErr when the log
// could not be opened) and tells which register note is the crashing
// CPU's, given each note's pr_pid in note order (vmcore.CPU.PID).
//
// The note is the one at the report's CPU number (kdump and QEMU write
// one note per CPU, in CPU order); without a CPU number, the one note
// whose pr_pid is the report's PID (kdump's notes hold the running task's
// PID there, QEMU's a vCPU number, so the PID alone decides only when one
// note has it). A note index is never assumed equal to a CPU number the
// report does not give.
func Find(log *printk.Log, logErr error, notePIDs []int32) *Facts {
	f := &Facts{Note: -1, LogErr: logErr}
	if log == nil {
		if f.LogErr == nil {
			f.LogErr = fmt.Errorf("crash: no kernel log")
		}
	} else {
		var recs []printk.Record
		for e := range log.Entries() {
			if e.Gap == nil {
				recs = append(recs, e.Record)
			}
		}
		if c, ok := printk.FindCrash(recs); ok {
			f.Report, f.Records = c, recs[c.Start:c.End]
		}
	}
	f.Note, f.How = pickNote(f.CPU(), f.PID(), notePIDs)
	return f
}

// pickNote tells the crashing CPU's note from the report's CPU and PID (-1
// unknown) and the notes' pr_pid values (see Find).
func pickNote(cpu, pid int, notePIDs []int32) (int, string) {
	switch {
	case cpu >= 0 && cpu < len(notePIDs):
		how := "notes are in CPU order"
		if pid > 0 && int(notePIDs[cpu]) == pid {
			how += "; its pr_pid is the report's PID"
		}
		return cpu, how
	case pid > 0:
		note, n := -1, 0
		for i, p := range notePIDs {
			if int(p) == pid {
				note, n = i, n+1
			}
		}
		if n == 1 {
			return note, fmt.Sprintf("its pr_pid is the report's PID %d", pid)
		}
	}
	return -1, ""
}
