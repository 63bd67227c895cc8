package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
)

// cmdPanic prints why the kernel crashed: the panic or oops report from the
// log, which CPU crashed, and every CPU's registers from its NT_PRSTATUS
// note, kernel addresses symbolized.
func cmdPanic(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("panic", "panic [flags] VMCORE")
	c.register(fs)
	// A few dozen lookups: decoding names on demand beats expanding the
	// whole table (--lazy=false expands it).
	c.lazy = true
	fs.Lookup("lazy").DefValue = "true"
	format := fs.String("format", "text", "output `format`: text or json")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("panic: no VMCORE given")
	}
	if *format != "text" && *format != "json" {
		return usagef("panic: unknown format %q (want text or json)", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	var rep *panicReport
	err = s.Phase("output", func() error {
		rep = buildPanicReport(s)
		bw := bufio.NewWriter(stdout)
		if *format == "json" {
			b, err := json.Marshal(rep)
			if err != nil {
				return err
			}
			bw.Write(append(b, '\n'))
		} else {
			rep.writeText(bw)
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	if rep.LogError != "" {
		return fmt.Errorf("panic: the kernel log: %s", rep.LogError)
	}
	return nil
}

type panicReport struct {
	Message  string `json:"message,omitempty"`
	Panicked bool   `json:"panicked"`
	// Report is the panic or oops report, as dmesg prints it.
	Report []string `json:"report,omitempty"`
	// CrashingCPU is the index of the crashing CPU's note in CPUs; -1
	// when unknown. How says how it was told.
	CrashingCPU int       `json:"crashing_cpu"`
	How         string    `json:"crashing_cpu_from,omitempty"`
	LogCPU      int       `json:"log_cpu"` // the "CPU: N" of the report; -1 without one
	PID         int       `json:"pid"`     // the "PID: P" of the report; -1 without one
	Comm        string    `json:"comm,omitempty"`
	CPUs        []cpuDump `json:"cpus"`
	LogError    string    `json:"log_error,omitempty"`
}

type cpuDump struct {
	Note      int        `json:"note"`   // index of its NT_PRSTATUS note
	PID       int32      `json:"pr_pid"` // kdump: the running task (0 idle); QEMU: a vCPU number
	Crashing  bool       `json:"crashing,omitempty"`
	Registers []register `json:"registers"`
	// Unwinder names how Frames were found ("frame pointers"), or is
	// empty with Stop saying why the stack was not unwound.
	Unwinder string  `json:"unwinder,omitempty"`
	Frames   []frame `json:"frames,omitempty"`
	Stop     string  `json:"stop"`
}

type frame struct {
	PC     string `json:"pc"`
	Symbol string `json:"symbol,omitempty"`
	// ExceptionFrame is, for a pc the walk read from an exception frame
	// (the interrupted code's), the address of its struct pt_regs.
	ExceptionFrame string `json:"exception_frame,omitempty"`
	// FoundBy says how a frame the unwinder's own rules did not give was
	// found (unwind.Recovery): the method, then how it was checked.
	FoundBy string `json:"found_by,omitempty"`
}

type register struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Symbol string `json:"symbol,omitempty"`
}

func buildPanicReport(s *kdumpsyms.Session) *panicReport {
	rep := &panicReport{CrashingCPU: -1, LogCPU: -1, PID: -1}
	cf := s.Crash()
	if cf.LogErr != nil {
		rep.LogError = cf.LogErr.Error()
	}
	if cr := cf.Report; cr != nil {
		rep.Message, rep.Panicked = cr.Message, cr.Panicked
		rep.LogCPU, rep.PID, rep.Comm = cr.CPU, cr.PID, cr.Comm
		for _, r := range cf.Records {
			for line := range splitLines(r.Text) {
				rep.Report = append(rep.Report, "["+r.Timestamp()+"] "+line)
			}
		}
	}
	rep.CrashingCPU, rep.How = cf.Note, cf.How
	d := s.Dump()
	cpus := d.CPUs()
	names := elfcore.RegisterNames(d.Arch().ELFMachine())
	digits, minAddr := addrShape(s)
	for i, c := range cpus {
		cd := cpuDump{Note: i, PID: c.PID, Crashing: i == rep.CrashingCPU}
		for j, v := range c.Regs {
			name := fmt.Sprintf("reg%d", j)
			if j < len(names) {
				name = names[j]
			}
			r := register{Name: name, Value: fmt.Sprintf("%0*x", digits, v)}
			if v >= minAddr && v != 0 {
				if sym, err := s.Chain().Lookup(v); err == nil {
					r.Symbol = sym.Format(v)
				}
			}
			cd.Registers = append(cd.Registers, r)
		}
		unwindCPU(s, &cd, c.Regs, digits)
		rep.CPUs = append(rep.CPUs, cd)
	}
	return rep
}

// unwindCPU walks the CPU's stack (Session.Unwind) and symbolizes its
// frames.
func unwindCPU(s *kdumpsyms.Session, cd *cpuDump, regs []uint64, digits int) {
	st := s.Unwind(regs)
	cd.Unwinder = st.Unwinder
	if st.Unwinder == "" {
		cd.Stop = fmt.Sprintf("not unwound: %v; the registers alone are above", st.Stop.Err)
		return
	}
	cd.Stop = st.Stop.String()
	for _, f := range st.Frames {
		fr := frame{PC: fmt.Sprintf("%0*x", digits, f.PC)}
		if f.Regs != 0 {
			fr.ExceptionFrame = fmt.Sprintf("%0*x", digits, f.Regs)
		}
		if sym, err := s.Chain().Lookup(f.PC); err == nil {
			fr.Symbol = sym.Format(f.PC)
		}
		if r := f.Recovered; r != nil {
			fr.FoundBy = fmt.Sprintf("%s (the frame before has no usable entry: %v): %s", r.Method, r.Cause, r)
			if sym, err := s.Chain().Lookup(r.Func); r.Func != 0 && err == nil {
				fr.FoundBy += "; the function: " + sym.Name
			}
		}
		cd.Frames = append(cd.Frames, fr)
	}
}

func splitLines(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for {
			i := 0
			for i < len(s) && s[i] != '\n' {
				i++
			}
			if !yield(s[:i]) || i == len(s) {
				return
			}
			s = s[i+1:]
		}
	}
}

func (rep *panicReport) writeText(w *bufio.Writer) {
	switch {
	case rep.Message != "":
		fmt.Fprintf(w, "panic:        %s\n", rep.Message)
	case rep.LogError != "":
		fmt.Fprintf(w, "panic:        unknown: the kernel log cannot be read (%s)\n", rep.LogError)
	default:
		fmt.Fprintf(w, "panic:        none: the log holds no panic or oops report\n")
	}
	switch {
	case rep.CrashingCPU >= 0 && rep.LogCPU >= 0:
		fmt.Fprintf(w, "crashing CPU: %d (PID %d, %s), registers from note %d (%s)\n", rep.LogCPU, rep.PID, rep.Comm, rep.CrashingCPU, rep.How)
	case rep.LogCPU >= 0:
		fmt.Fprintf(w, "crashing CPU: %d (PID %d, %s), whose register note is not told apart\n", rep.LogCPU, rep.PID, rep.Comm)
	default:
		fmt.Fprintf(w, "crashing CPU: unknown (no \"CPU: … PID: …\" line in the report)\n")
	}
	if len(rep.Report) > 0 {
		fmt.Fprintln(w)
		for _, l := range rep.Report {
			fmt.Fprintln(w, l)
		}
	}
	if len(rep.CPUs) == 0 {
		fmt.Fprintf(w, "\nno CPU registers: the dump has no NT_PRSTATUS notes for its architecture\n")
	}
	for _, c := range rep.CPUs {
		fmt.Fprintf(w, "\nCPU note %d, pr_pid %d", c.Note, c.PID)
		if c.Crashing {
			fmt.Fprint(w, ", crashing")
		}
		fmt.Fprintln(w, ":")
		for _, r := range c.Registers {
			fmt.Fprintf(w, "  %-8s %s", r.Name, r.Value)
			if r.Symbol != "" {
				fmt.Fprintf(w, "  %s", r.Symbol)
			}
			fmt.Fprintln(w)
		}
		if c.Unwinder == "" {
			fmt.Fprintf(w, "  %s\n", c.Stop)
			continue
		}
		fmt.Fprintf(w, "  call trace (%s):\n", c.Unwinder)
		for _, f := range c.Frames {
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
		fmt.Fprintf(w, "  stopped: %s\n", c.Stop)
	}
}
