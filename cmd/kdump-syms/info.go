package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/bpfsyms"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
)

func cmdInfo(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("info", "info [flags] VMCORE")
	c.register(fs)
	format := fs.String("format", "text", "output `format`: text or json")
	noSymbols := fs.Bool("no-symbols", false, "print only what the dump and its VMCOREINFO say, decoding no symbols")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("info: no VMCORE given")
	}
	if *format != "text" && *format != "json" {
		return usagef("info: unknown format %q (want text or json)", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	r := dumpReport(s, append(pos, c.parts...))
	if !*noSymbols {
		symbolReport(s, r)
	}
	// The same failures, whichever the rendering.
	for _, f := range r.failures {
		c.rep.addFrom(f.source, f.err)
	}
	if *format == "json" {
		if err := writeInfoJSON(stdout, r); err != nil {
			return err
		}
	} else if err := writeInfoText(stdout, r); err != nil {
		return err
	}
	if *noSymbols {
		return nil
	}
	c.addModuleFailures(s)
	return c.rep.finish(stderr, true)
}

// writeInfoText renders the report as "key: value" lines, blocks indented.
func writeInfoText(out io.Writer, r *infoReport) error {
	w := bufio.NewWriter(out)
	kv := func(k string, format string, a ...any) {
		fmt.Fprintf(w, "%-22s %s\n", k+":", fmt.Sprintf(format, a...))
	}
	block := func(title, text string) {
		fmt.Fprintf(w, "%s:\n", title)
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(line))
		}
	}
	kv("files", "%s", strings.Join(r.Files, " "))
	kv("format", "%s", r.Format)
	a := r.Architecture
	order := "unknown"
	if a.ByteOrder != "" {
		order = strings.ToUpper(a.ByteOrder[:1]) + a.ByteOrder[1:] + "-endian"
	}
	kv("architecture", "%s (%s, %d-byte pointers, from %s)", orUnknown(a.Name), order, a.PointerSize, orUnknown(a.Source))
	kv("page size", "%d", r.PageSize)
	kv("vmcoreinfo", "%s", orUnknown(r.VMCOREINFO.Source))
	if r.DeriveError != "" {
		kv("vmcoreinfo error", "%s", r.DeriveError)
	}
	if r.VMCOREINFO.Describe != "" {
		kv("vmcoreinfo check", "%s", r.VMCOREINFO.Describe)
	}
	if r.hasInfo {
		kv("kernel release", "%s", r.Release)
		if r.KASLROffset != "" {
			kv("kaslr offset", "%s", r.KASLROffset)
		}
		if r.CrashTime != "" {
			kv("crash time", "%s", r.CrashTime)
		} else {
			kv("crash time", "not recorded (no CRASHTIME: the dump was not taken by kdump)")
		}
		if r.BuildID != "" {
			kv("build id", "%s", r.BuildID)
		}
	} else if r.VMCOREINFO.Error != "" {
		kv("vmcoreinfo error", "%s", r.VMCOREINFO.Error)
	}
	kv("cpus", "%d", r.CPUs)
	if r.Translation == nil {
		return w.Flush()
	}
	if r.Translation.Error != "" {
		kv("translation", "unavailable: %s", r.Translation.Error)
	} else {
		block("translation", r.Translation.Describe)
	}
	if r.Kallsyms.Error != "" {
		kv("kallsyms", "unavailable: %s", r.Kallsyms.Error)
	} else {
		block("kallsyms", r.Kallsyms.Describe)
	}
	if r.Modules.unavailable {
		kv("modules", "unavailable: %s", r.Modules.Error)
	} else {
		kv("modules", "%d loaded, %d symbols", r.Modules.Loaded, r.Modules.Symbols)
		if r.Modules.Error != "" {
			kv("modules failed", "%s", r.Modules.Error)
		}
	}
	if len(r.Layouts.Detail) == 0 {
		kv("layouts", "%s", r.Layouts.How)
	} else {
		block("layouts: "+r.Layouts.How, strings.Join(r.Layouts.Detail, "\n"))
	}
	for _, f := range r.Finders {
		state := "enabled"
		if !f.Enabled {
			state = "disabled"
		}
		if f.Error != "" {
			kv("finder "+f.Name, "%s, unavailable: %s", state, f.Error)
			continue
		}
		kv("finder "+f.Name, "%s, %d symbols", state, f.Symbols)
		for _, h := range f.Heads {
			kv("  list head", "%s at %s, from %s", h.Symbol, h.Addr, h.How)
		}
	}
	if r.KernelLog.Error != "" {
		kv("kernel log", "unavailable: %s", r.KernelLog.Error)
	} else {
		kv("kernel log", "%s", r.KernelLog.Describe)
	}
	return w.Flush()
}

// pseudoHeads returns where the list heads of a pseudo-module finder
// (ftrace, bpf, kprobes) came from, for those it read; nil for others.
func pseudoHeads(s *kdumpsyms.Session, finder string) []bpfsyms.Head {
	var set *bpfsyms.Set
	switch finder {
	case kdumpsyms.FinderFtrace:
		set, _ = s.Ftrace()
	case kdumpsyms.FinderBPF:
		set, _ = s.BPF()
	case kdumpsyms.FinderKprobes:
		set, _ = s.Kprobes()
	}
	if set == nil {
		return nil
	}
	return set.Heads()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func cmdModules(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("modules", "modules [flags] VMCORE")
	c.register(fs)
	format := fs.String("format", "text", "output `format`: text (as /proc/modules prints it) or json (one object a line; unknown values null, with why)")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("modules: no VMCORE given")
	}
	if *format != "text" && *format != "json" {
		return usagef("modules: --format %q: want text or json", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	set, merr := s.Modules()
	if set == nil {
		return c.rep.fatal(stderr, merr)
	}
	digits := 16
	if s.Dump().Arch().PtrSize == 4 {
		digits = 8
	}
	w := bufio.NewWriter(stdout)
	for _, m := range set.Modules() {
		if m.DepsErr != nil {
			c.rep.addFrom(kdumpsyms.FinderModules, m.DepsErr)
		}
		var err error
		if *format == "json" {
			err = writeModuleJSON(w, m, digits)
		} else {
			_, err = fmt.Fprintln(w, moduleLine(m, digits))
		}
		if err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c.addModuleFailures(s)
	return c.rep.finish(stderr, true)
}

// moduleLine is m as /proc/modules prints it (name size refcount users
// state address [flags]), with "?" for what could not be read.
func moduleLine(m *modsyms.Module, digits int) string {
	ref := "-"
	if m.HasRefCount {
		ref = fmt.Sprint(m.RefCount)
	}
	deps := "-"
	if len(m.Deps) > 0 {
		deps = strings.Join(m.Deps, ",") + ","
	}
	// Inferred layouts: what was not inferred is not known.
	if m.Inferred && !m.HasRefCount {
		ref = "?"
	}
	if m.Inferred && m.Deps == nil {
		deps = "?"
	}
	if m.DepsErr != nil {
		// The users read before the list broke, then "?": the rest
		// are unknown, not absent.
		deps = strings.Join(append(slices.Clone(m.Deps), "?"), ",")
	}
	line := fmt.Sprintf("%s %d %s %s %s 0x%0*x", m.Name, m.Size, ref, deps, m.State, digits, m.TextBase)
	if m.Inferred && !m.HasTaints {
		line += " (?)" // taints not known
	} else if f := m.Flags(); f != "" {
		line += " " + f
	}
	return line
}

// moduleJSON is one line of modules --format json: /proc/modules' columns
// as fields, an unknown value null with a "…_unknown" field saying why.
type moduleJSON struct {
	Name            string   `json:"name"`
	Size            uint64   `json:"size"`
	RefCount        *int64   `json:"refcount"`
	RefCountUnknown string   `json:"refcount_unknown,omitempty"`
	Users           []string `json:"users"`
	UsersUnknown    string   `json:"users_unknown,omitempty"`
	State           string   `json:"state"`
	Address         string   `json:"address"`
	Taints          *string  `json:"taints"`
	TaintsUnknown   string   `json:"taints_unknown,omitempty"`
	StructModule    string   `json:"struct_module"`
	Error           string   `json:"error,omitempty"`
}

// writeModuleJSON writes m as one moduleJSON line.
func writeModuleJSON(w io.Writer, m *modsyms.Module, digits int) error {
	j := moduleJSON{Name: m.Name, Size: m.Size, State: m.State.String(),
		Address: fmt.Sprintf("0x%0*x", digits, m.TextBase), StructModule: fmt.Sprintf("0x%0*x", digits, m.Addr)}
	switch {
	case m.HasRefCount:
		j.RefCount = &m.RefCount
	case m.Inferred:
		j.RefCountUnknown = "not found by the inferred layouts"
	default:
		j.RefCountUnknown = "no refcnt (a kernel without CONFIG_MODULE_UNLOAD)"
	}
	switch {
	case m.DepsErr != nil:
		j.Users = m.Deps
		j.UsersUnknown = "read up to a break: " + m.DepsErr.Error()
	case m.Deps != nil:
		j.Users = m.Deps
	case m.Inferred:
		j.UsersUnknown = "not found by the inferred layouts"
	default:
		j.Users = []string{}
	}
	if m.Inferred && !m.HasTaints {
		j.TaintsUnknown = "not found by the inferred layouts"
	} else {
		f := strings.Trim(m.Flags(), "()-+")
		j.Taints = &f
	}
	if m.Err != nil {
		j.Error = m.Err.Error()
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// progress prints msg on stderr if the work takes longer than a second and
// stderr is a terminal; the returned func ends it.
func progress(stderr io.Writer, msg string) func() {
	f, ok := stderr.(*os.File)
	if !ok {
		return func() {}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
		start := time.Now().Add(-time.Second)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		spin := `|/-\`
		for i := 0; ; i++ {
			fmt.Fprintf(f, "\rkdump-syms: %s %c %.0fs", msg, spin[i%4], time.Since(start).Seconds())
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// peakHeap returns the process's peak resident set size (VmHWM) on Linux,
// else the Go heap obtained from the OS.
func peakHeap() uint64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
				var kb uint64
				if _, err := fmt.Sscanf(strings.TrimSpace(string(v)), "%d kB", &kb); err == nil {
					return kb << 10
				}
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapSys
}
