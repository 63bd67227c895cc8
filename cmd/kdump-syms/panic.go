package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/printk"
	"github.com/kdumpsyms/kdumpsyms/unwind"
)

// cmdPanic prints why the kernel crashed: the panic or oops report from the
// log, which CPU crashed, and every CPU's registers from its NT_PRSTATUS
// note, kernel addresses symbolized.
func cmdPanic(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("panic", "panic [flags] VMCORE")
	c.register(fs)
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
}

type register struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Symbol string `json:"symbol,omitempty"`
}

func buildPanicReport(s *kdumpsyms.Session) *panicReport {
	rep := &panicReport{CrashingCPU: -1, LogCPU: -1, PID: -1}
	var recs []printk.Record
	if l, err := s.Log(); err != nil {
		rep.LogError = err.Error()
	} else {
		for e := range l.Entries() {
			if e.Gap == nil {
				recs = append(recs, e.Record)
			}
		}
	}
	if cr, ok := printk.FindCrash(recs); ok {
		rep.Message, rep.Panicked = cr.Message, cr.Panicked
		rep.LogCPU, rep.PID, rep.Comm = cr.CPU, cr.PID, cr.Comm
		for _, r := range recs[cr.Start:cr.End] {
			for line := range splitLines(r.Text) {
				rep.Report = append(rep.Report, "["+r.Timestamp()+"] "+line)
			}
		}
	}
	d := s.Dump()
	cpus := d.CPUs()
	// The crashing CPU: the note at the report's CPU number (kdump and
	// QEMU write one note per CPU, in CPU order); else the one note whose
	// pr_pid is the report's PID. kdump's notes hold the running task's
	// PID there, QEMU's a vCPU number, so the PID only confirms.
	switch {
	case rep.LogCPU >= 0 && rep.LogCPU < len(cpus):
		rep.CrashingCPU = rep.LogCPU
		rep.How = "notes are in CPU order"
		if rep.PID > 0 && int(cpus[rep.LogCPU].PID) == rep.PID {
			rep.How += "; its pr_pid is the report's PID"
		}
	case rep.PID > 0:
		n := 0
		for i, c := range cpus {
			if int(c.PID) == rep.PID {
				rep.CrashingCPU, n = i, n+1
			}
		}
		if n == 1 {
			rep.How = fmt.Sprintf("its pr_pid is the report's PID %d", rep.PID)
		} else {
			rep.CrashingCPU = -1
		}
	}
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
		unwindCPU(s, &cd, c.Regs, digits, minAddr)
		rep.CPUs = append(rep.CPUs, cd)
	}
	return rep
}

// fpRegister is the frame pointer's index in PRSTATUS's registers, for the
// architectures whose kernels keep frame pointers.
var fpRegister = map[string]int{"arm64": 29, "i386": 5}

// unwindCPU walks the CPU's stack where the kernel has frame pointers.
func unwindCPU(s *kdumpsyms.Session, cd *cpuDump, regs []uint64, digits int, minAddr uint64) {
	d := s.Dump()
	arch := d.Arch()
	if arch.Name == "x86_64" {
		unwindORC(s, cd, regs, minAddr)
		return
	}
	fpi, ok := fpRegister[arch.Name]
	if arch.Name == "s390x" {
		fpi, ok = 17, true // r15, the stack pointer: s390x walks its back chain
	}
	if !ok || fpi >= len(regs) || len(regs) == 0 {
		cd.Stop = fmt.Sprintf("not unwound: no unwinder for %s kernels; the registers alone are above", orUnknown(arch.Name))
		return
	}
	kmem, err := s.Kernel()
	if err != nil {
		cd.Stop = fmt.Sprintf("not unwound: %v", err)
		return
	}
	opt := unwind.Options{ByteOrder: arch.ByteOrder, PtrSize: arch.PtrSize, KernelStart: minAddr, UserEnd: minAddr}
	if in := d.Info(); in != nil {
		if m, ok := in.Get("NUMBER(KERNELPACMASK)"); ok {
			fmt.Sscanf(m, "0x%x", &opt.PACMask)
		}
	}
	switch arch.Name {
	case "arm64":
		opt.StackSize = max(16<<10, uint64(d.PageSize())) // THREAD_SIZE
	case "i386":
		opt.StackSize = 8 << 10
		// User space ends at PAGE_OFFSET, the 1 GiB boundary below the
		// kernel's text (0xc0000000 with the default 3G/1G split).
		if st, err := s.Chain().LookupName("_stext"); err == nil {
			opt.UserEnd = st.Addr &^ (1<<30 - 1)
		}
	}
	names := elfcore.RegisterNames(arch.ELFMachine())
	pcName := map[string]string{"arm64": "pc", "i386": "eip", "s390x": "psw_addr"}[arch.Name]
	var pc uint64
	for i, n := range names {
		if n == pcName && i < len(regs) {
			pc = regs[i]
		}
	}
	var frames []unwind.Frame
	var stop unwind.Stop
	if arch.Name == "s390x" {
		opt.UserEnd = 0 // the kernel and user space have address spaces of their own
		frames, stop = unwind.BackChainS390(kmem, pc, regs[fpi], opt)
		cd.Unwinder = "back chain"
	} else {
		frames, stop = unwind.FramePointer(kmem, pc, regs[fpi], opt)
		cd.Unwinder = "frame pointers"
	}
	cd.Stop = stop.String()
	symbolizeFrames(s, cd, frames, digits)
}

func symbolizeFrames(s *kdumpsyms.Session, cd *cpuDump, frames []unwind.Frame, digits int) {
	for _, f := range frames {
		fr := frame{PC: fmt.Sprintf("%0*x", digits, f.PC)}
		if sym, err := s.Chain().Lookup(f.PC); err == nil {
			fr.Symbol = sym.Format(f.PC)
		}
		cd.Frames = append(cd.Frames, fr)
	}
}

// unwindORC walks an x86_64 CPU's stack with vmlinux's ORC tables, found
// by their symbols (kallsyms has them with CONFIG_KALLSYMS_ALL).
func unwindORC(s *kdumpsyms.Session, cd *cpuDump, regs []uint64, minAddr uint64) {
	var t unwind.ORCTables
	for _, v := range []struct {
		name string
		addr *uint64
	}{{"__start_orc_unwind_ip", &t.IPStart}, {"__stop_orc_unwind_ip", &t.IPStop}, {"__start_orc_unwind", &t.Entries}} {
		sym, err := s.Chain().LookupName(v.name)
		if err != nil {
			cd.Stop = fmt.Sprintf("not unwound: the ORC tables are not found (%v); the registers alone are above", err)
			return
		}
		*v.addr = sym.Addr
	}
	if in := s.Dump().Info(); in != nil {
		var maj, min int
		fmt.Sscanf(in.OSRelease(), "%d.%d", &maj, &min)
		t.Format = unwind.ORCFormatFor(maj, min)
	}
	kmem, err := s.Kernel()
	if err != nil {
		cd.Stop = fmt.Sprintf("not unwound: %v", err)
		return
	}
	frames, stop := unwind.ORC(kmem, regs, t, unwind.Options{KernelStart: minAddr})
	cd.Unwinder = "ORC"
	cd.Stop = stop.String()
	symbolizeFrames(s, cd, frames, 16)
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
			if f.Symbol != "" {
				fmt.Fprintf(w, "   %s\n", f.Symbol)
			} else {
				fmt.Fprintf(w, "   0x%s\n", f.PC)
			}
		}
		fmt.Fprintf(w, "  stopped: %s\n", c.Stop)
	}
}
