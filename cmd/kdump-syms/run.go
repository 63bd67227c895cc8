package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/memimage"
	"github.com/kdumpsyms/kdumpsyms/oops"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

const usageText = `kdump-syms recovers a Linux kernel's symbols from a crash dump (vmcore),
with no vmlinux and no debug info.

Usage:
  kdump-syms --version                         module version and VCS revision
  kdump-syms all     [flags] VMCORE            every symbol, as /proc/kallsyms printed it
  kdump-syms addr    [flags] VMCORE ADDR...    symbolize addresses, or NAME+0xOFF [MOD] in reverse ("-": an oops on stdin)
  kdump-syms name    [flags] VMCORE NAME...    symbols by name (MOD:NAME, --module, --glob, --regexp)
  kdump-syms info    [flags] VMCORE            what the dump is and how it was decoded
  kdump-syms modules [flags] VMCORE            the module list, like /proc/modules
  kdump-syms dmesg   [flags] VMCORE            the kernel log, as dmesg prints it
  kdump-syms vmcoreinfo [flags] VMCORE [KEY...] the VMCOREINFO note, or the values of KEYs
  kdump-syms panic   [flags] VMCORE            the panic report, the crashing CPU, every CPU's registers
  kdump-syms ps      [flags] VMCORE            every task (threads, idle tasks) with PID, PPID, CPU, state, comm
  kdump-syms bt      [flags] VMCORE [PID...]   each task's kernel stack, identical ones grouped (--state D; x86_64)
  kdump-syms extract [flags] -o OUT VMCORE     a small dump holding only what decoding reads
  kdump-syms export  [flags] -o DIR VMCORE     ELF symbol files for gdb, nm, readelf (--format elf),
                                              or -o FILE a volatility3 symbol table (--format isf)

VMCORE is an ELF core (/proc/vmcore, makedumpfile -E, QEMU dump-guest-memory),
a kdump-compressed file (makedumpfile, QEMU; flattened too), a LiME or AVML
memory image, or with --raw BASE a raw physical memory image; optionally
wrapped in xz, zstd or gzip; name the other parts of a split dump with --part.
VMCORE "-" reads the dump from standard input (a pipe, e.g. makedumpfile -F
over ssh); pipes and FIFOs are copied to a temporary file first.
Run "kdump-syms COMMAND --help" for a command's flags.

Examples:
  kdump-syms all vmcore > kallsyms.txt
  kdump-syms addr vmcore ffffffff81a2b3c4 ffffffffc0a1b2c4
  kdump-syms addr vmcore - < oops.txt
  kdump-syms name --glob vmcore 'tcp_v4_*'
  kdump-syms info vmcore
  kdump-syms modules vmcore
  kdump-syms ps vmcore
  kdump-syms bt --state D vmcore
  kdump-syms extract -o small.elf vmcore
  kdump-syms export --format elf -o syms vmcore
  kdump-syms export --format isf -o syms/linux/kernel.json vmcore

Each root cause of a failure is printed once, in one line; -v adds the
full chain.

Exit status (every command):
  0  everything asked for was produced
  3  output was produced, but some part failed (a finder, a module, an
     address); stderr says which
  1  nothing useful could be produced
  2  usage error
`

// errUsage marks errors whose exit status is 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// common holds the flags every command takes.
type common struct {
	parts        multiFlag
	vmlinux      string
	systemMap    string
	kallsymsFile string
	finders      string
	lazy         bool
	stats        bool
	noCache      bool
	demangle     bool
	layouts      layoutFlags // layouts.go
	raw          []memimage.RawRange
	arch         string
	vmcoreinfo   string
	checkInfo    bool
	started      time.Time
	rep          report
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (c *common) register(fs *flag.FlagSet) {
	fs.Var(&c.parts, "part", "another part of a split dump (repeatable)")
	fs.StringVar(&c.vmlinux, "vmlinux", "", "add the symtab of a vmlinux ELF `file` (shifted by the dump's KASLR offset)")
	fs.StringVar(&c.systemMap, "system-map", "", "add a System.map `file` (shifted by the dump's KASLR offset)")
	fs.StringVar(&c.kallsymsFile, "kallsyms", "", "add a saved /proc/kallsyms `file`")
	fs.StringVar(&c.finders, "finders", "", "enabled finders, in order (`list`, comma-separated; default: all)\n"+
		"names: kallsyms, modules, vmlinux, system.map, kallsyms-file")
	fs.BoolVar(&c.lazy, "lazy", false, "decode kallsyms names on demand instead of expanding the whole table")
	fs.BoolVar(&c.stats, "stats", false, "print time, bytes read and heap per phase on stderr, as key=value lines")
	fs.BoolVar(&c.demangle, "demangle", false, "show Rust symbol names (v0 and legacy) demangled")
	fs.BoolVar(&c.noCache, "no-cache", false, "do not keep decompressed .xz/.zst/.gz dumps in the user's cache directory\n"+
		"(default: kept, keyed by the wrapped file's SHA-256, 4 GiB at most, least recently used removed first)")
	fs.Func("raw", "read VMCORE as a raw physical memory image at `BASE[:SIZE][,BASE[:SIZE]...]`\n"+
		"(its ranges one after the other in the file; e.g. 0x0, 0x40000000, 0:3G,0x100000000)", func(v string) error {
		l, err := memimage.ParseRawLayout(v)
		if err == nil {
			c.raw = l
		}
		return err
	})
	fs.StringVar(&c.arch, "arch", "", "the dump's architecture `NAME` (x86_64, i386, arm64, s390x, ...) when neither the\n"+
		"container nor VMCOREINFO tells (LiME, AVML and raw images of i386)")
	fs.StringVar(&c.vmcoreinfo, "vmcoreinfo", "", "use the VMCOREINFO text in `file` instead of the dump's (kdump-syms vmcoreinfo\n"+
		"output of another dump of the same boot, makedumpfile -g output)")
	fs.BoolVar(&c.checkInfo, "check-vmcoreinfo", false, "compare the dump's VMCOREINFO with the note in its memory even when it validates\n"+
		"(a scan of memory; when they differ the one that validates is used, and info says so)")
	fs.BoolVar(&c.rep.verbose, "v", false, "verbose errors: after each root cause, the full chain of every failure it caused")
	c.layouts.register(fs)
}

// cacheDir is where decompressed wrapped dumps are kept: kdump-syms in the
// user's cache directory, or "" (no cache) with --no-cache or when the
// user has none.
func (c *common) cacheDir() string {
	if c.noCache {
		return ""
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kdump-syms")
}

// parseInterspersed parses flags that may follow positional arguments, as
// users type them ("kdump-syms all vmcore --format json").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(args, stdin, stdout, stderr)
	var ue usageError
	var ex exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, syscall.EPIPE):
		return exitOK // the reader of stdout stopped reading: enough was printed
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kdump-syms: %v\n", err)
		return exitUsage
	case errors.As(err, &ex):
		return int(ex)
	default:
		var r report
		r.add(err)
		r.print(stderr)
		return exitError
	}
}

// exitCode ends a command with a status and no message.
type exitCode int

func (e exitCode) Error() string { return "exit " + strconv.Itoa(int(e)) }

func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return usagef("no command")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	case "version", "-version", "--version":
		printVersion(stdout)
		return nil
	case "all":
		return cmdAll(args, stdout, stderr)
	case "addr":
		return cmdAddr(args, stdin, stdout, stderr)
	case "name":
		return cmdName(args, stdout, stderr)
	case "info":
		return cmdInfo(args, stdout, stderr)
	case "modules":
		return cmdModules(args, stdout, stderr)
	case "extract":
		return cmdExtract(args, stdout, stderr)
	case "export":
		return cmdExport(args, stdout, stderr)
	case "dmesg":
		return cmdDmesg(args, stdout, stderr)
	case "vmcoreinfo":
		return cmdVMCOREINFO(args, stdout, stderr)
	case "panic":
		return cmdPanic(args, stdout, stderr)
	case "ps":
		return cmdPs(args, stdout, stderr)
	case "bt":
		return cmdBt(args, stdout, stderr)
	}
	if s := suggest(cmd); s != "" {
		return usagef("unknown command %q; did you mean %q? (kdump-syms --help lists the commands)", cmd, s)
	}
	fmt.Fprint(stderr, usageText)
	return usagef("unknown command %q", cmd)
}

func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kdump-syms %s\n", synopsis)
		if ex := examples[name]; ex != "" {
			fmt.Fprintf(fs.Output(), "\nExample:\n  %s\n", strings.ReplaceAll(ex, "; ", "\n  "))
		}
		fmt.Fprintf(fs.Output(), "\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a command's arguments. --help prints the command's
// usage on stdout and is success; a bad flag is a usage error of one line
// that says where the flags are listed (and, for an unknown flag, the
// nearest known one), not the whole usage above the error.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	// The flag package prints its error too; run prints it once, prefixed.
	fs.SetOutput(io.Discard)
	usage := fs.Usage
	fs.Usage = func() {}
	pos, err := parseInterspersed(fs, args)
	fs.Usage = usage
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, err
	}
	if err != nil {
		msg := fs.Name() + ": " + err.Error()
		// The flag package's words for an unknown flag, unchanged since Go 1.
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			if near := nearest(strings.TrimPrefix(name, "-"), names); near != "" {
				msg += fmt.Sprintf("; did you mean --%s?", near)
			}
		}
		return nil, usageError{fmt.Sprintf("%s (kdump-syms %s --help lists its flags)", msg, fs.Name())}
	}
	return pos, nil
}

// open opens the session for a command whose first positional argument is
// the dump.
func (c *common) open(dumpPaths []string, stderr io.Writer) (*kdumpsyms.Session, error) {
	c.started = time.Now()
	paths := withSplitSiblings(append(slices.Clone(dumpPaths), c.parts...), stderr)
	opt := kdumpsyms.Options{
		Dump:         vmcore.Options{CacheDir: c.cacheDir(), Raw: c.raw, Arch: c.arch, CheckInfo: c.checkInfo},
		Lazy:         c.lazy,
		VMLinux:      c.vmlinux,
		SystemMap:    c.systemMap,
		KallsymsFile: c.kallsymsFile,
	}
	if err := c.layouts.apply(&opt); err != nil {
		return nil, err
	}
	if c.vmcoreinfo != "" {
		text, err := readVMCOREINFOFile(c.vmcoreinfo)
		if err != nil {
			return nil, c.rep.fatal(stderr, err)
		}
		opt.Dump.VMCOREINFO = text
	}
	stop := progress(stderr, "opening "+paths[0])
	s, err := kdumpsyms.Open(opt, paths...)
	stop()
	if err != nil {
		return nil, c.rep.fatal(stderr, err)
	}
	if c.finders != "" {
		if err := s.Chain().SetOrder(strings.Split(c.finders, ",")...); err != nil {
			s.Close()
			return nil, usagef("--finders: %v", err)
		}
	}
	for _, p := range s.Dump().CachedNow() {
		// A copy of the evidence is kept: say so once, when it is made.
		fmt.Fprintf(stderr, "kdump-syms: kept the decompressed dump as %s for the next run (at most 4 GiB in all, least recently used removed first; --no-cache: keep none)\n", p)
	}
	c.rep.chain = s.Chain()
	c.checkSplit(s, paths[0])
	// Symbol files the user gave are checked against the dump now, not
	// only when a lookup reaches them: one of another build is reported
	// even where the dump's own finders answer first.
	for _, f := range s.Chain().Finders() {
		if !f.Enabled || !isFileFinder(f.Name) {
			continue
		}
		if fi, ok := s.Chain().Finder(f.Name); ok {
			if err := fi.Find(symfinder.Query{Kind: symfinder.ByName, Name: "_stext"}, func(symfinder.Symbol) bool { return false }); err != nil {
				c.rep.addFrom(f.Name, err)
			}
		}
	}
	for _, f := range s.Chain().Finders() {
		if f.Enabled {
			c.rep.finders = append(c.rep.finders, f.Name)
		}
	}
	return s, nil
}

// finish prints --stats and closes the session.
func (c *common) finish(s *kdumpsyms.Session, stderr io.Writer) {
	if c.stats {
		// Phases may nest: the lazy sources load inside "output".
		for _, p := range s.Stats() {
			fmt.Fprintf(stderr, "phase=%s time=%s bytes_read=%d heap_alloc=%d\n", p.Name, p.Duration, p.BytesRead, p.HeapAlloc)
		}
		fmt.Fprintf(stderr, "wall_time=%s\npeak_rss=%d\n", time.Since(c.started), peakHeap())
	}
	s.Close()
}

func cmdAll(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("all", "all [flags] VMCORE")
	c.register(fs)
	format := fs.String("format", "kallsyms", "output `format`: "+strings.Join(formats, ", ")+
		" (system.map: the core kernel only, sorted, at link-time addresses, as --system-map reads it)")
	module := fs.String("module", "", "only the symbols of module `NAME` (vmlinux: the core kernel)")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("all: no VMCORE given")
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	if *module == "vmlinux" {
		// The finders of modules and pseudo-modules hold no core-kernel
		// symbol: not loading them saves the module walk and the BTF.
		c.disableFinders(s, kdumpsyms.FinderModules, kdumpsyms.FinderFtrace, kdumpsyms.FinderBPF, kdumpsyms.FinderKprobes)
	}
	ptr := s.Dump().Arch().PtrSize
	sw, err := newSymbolWriter(stdout, *format, ptr)
	if err != nil {
		return usageError{err.Error()}
	}
	printed := 0
	defer preload(s)()
	err = s.Phase("output", func() error {
		var mapSyms []symfinder.Symbol
		fromDump := dumpFinders(s.Chain())
		for sym, err := range s.Chain().All() {
			if err != nil {
				c.rep.add(err)
				continue
			}
			if !moduleMatches(*module, sym.Module) {
				continue
			}
			if isFileFinder(sym.Finder) && dumpHas(fromDump, sym) {
				// One answer per symbol: a file given beside the dump
				// adds only what the dump's own finders lack.
				continue
			}
			if *format == "system.map" {
				mapSyms = append(mapSyms, sym)
				continue
			}
			if c.demangle {
				sym.Name = demangleName(sym.Name)
			}
			printed++
			if err := sw.write(sym); err != nil {
				return err
			}
		}
		if *format == "system.map" {
			slide, ok := s.KASLROffset()
			if !ok {
				// A System.map holds link-time addresses: with the offset
				// unknown, every address written would be a guess.
				return fmt.Errorf("--format system.map: the kernel's KASLR offset is unknown (%s kernels write no KERNELOFFSET in VMCOREINFO), so its link-time addresses are too: --format kallsyms gives the addresses it ran at", s.Dump().Arch().Name)
			}
			for _, sym := range symfinder.SystemMap(mapSyms, slide, ptr) {
				printed++
				if err := sw.write(sym); err != nil {
					return err
				}
			}
		}
		return sw.flush()
	})
	if err != nil {
		return err
	}
	if *module != "" && printed == 0 && !c.rep.failed() {
		c.rep.miss(fmt.Sprintf("symbols of module %q", *module))
	}
	// The modules that failed alone, when the module finder answered:
	// with --finders leaving it out, asking would walk the module list
	// (and read the BTF) for nothing and report what the user turned off.
	if finderEnabled(s, kdumpsyms.FinderModules) {
		c.addModuleFailures(s)
	}
	// A module filter that matched nothing is an answer while some finder
	// worked, as an unresolved address is.
	return c.rep.finish(stderr, printed > 0 || (*module != "" && !c.rep.explained()))
}

// preload starts loading the enabled module and pseudo-module finders on
// another goroutine, which `all` asks only after the core kernel's
// symbols: on a second core the BTF, the module walk and the lists are
// read while those lines print (deb13-6.12-amd64 raw kdump, wall median
// 50.8 -> 43.7 ms; QEMU ELF 58.2 -> 49.5 ms). The loads are the Session's own, done
// once; their errors stay with it and are reported when the chain asks.
// The returned function waits for them, before the dump may be closed.
func preload(s *kdumpsyms.Session) (wait func()) {
	loads := map[string]func(){
		kdumpsyms.FinderModules: func() { s.Modules() },
		kdumpsyms.FinderFtrace:  func() { s.Ftrace() },
		kdumpsyms.FinderBPF:     func() { s.BPF() },
		kdumpsyms.FinderKprobes: func() { s.Kprobes() },
	}
	var todo []func()
	for _, st := range s.Chain().Finders() {
		if f, ok := loads[st.Name]; ok && st.Enabled {
			todo = append(todo, f)
		}
	}
	var wg sync.WaitGroup
	if len(todo) > 0 {
		wg.Go(func() {
			for _, f := range todo {
				f()
			}
		})
	}
	return wg.Wait
}

// disableFinders turns the named finders of the session's chain off, those
// it has, and drops them from the finders the report names.
func (c *common) disableFinders(s *kdumpsyms.Session, names ...string) {
	for _, n := range names {
		if s.Chain().SetEnabled(n, false) == nil {
			c.rep.finders = slices.DeleteFunc(c.rep.finders, func(f string) bool { return f == n })
		}
	}
}

// finderEnabled reports whether the session's chain asks the finder name.
func finderEnabled(s *kdumpsyms.Session, name string) bool {
	for _, f := range s.Chain().Finders() {
		if f.Name == name {
			return f.Enabled
		}
	}
	return false
}

// addModuleFailures reports the modules that failed alone: the module
// finder skipped them and answered for the others.
func (c *common) addModuleFailures(s *kdumpsyms.Session) {
	if set, merr := s.Modules(); set != nil && merr != nil {
		c.rep.addFrom(kdumpsyms.FinderModules, merr)
	}
}

// reportingLookuper records the failures of the finders a lookup asked.
type reportingLookuper struct {
	ch  *symfinder.Chain
	rep *report
}

func (l reportingLookuper) Lookup(addr uint64) (symfinder.Symbol, error) {
	sym, err := l.ch.Lookup(addr)
	if err != nil {
		l.rep.add(err)
	}
	return sym, err
}

func (l reportingLookuper) Find(q symfinder.Query) ([]symfinder.Symbol, error) {
	syms, err := l.ch.Find(q)
	if err != nil {
		l.rep.add(err)
	}
	return syms, err
}

func cmdAddr(args []string, stdinText io.Reader, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("addr", "addr [flags] VMCORE ADDR|NAME+0xOFF[/0xSIZE] [MOD]... | addr [flags] VMCORE -")
	c.register(fs)
	addresses := fs.Bool("addresses", false, `with "-": add the address of each symbolic frame (sym+off [mod]), for objdump or gdb`)
	outFormat := fs.String("format", "text", "output `format` of ADDR queries: text, or json (one object a query)")
	if err := negativeAddress(args); err != nil {
		return err
	}
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("addr: want VMCORE and at least one address, or - to read text from stdin")
	}
	if pos[0] == "-" && slices.Contains(pos[1:], "-") {
		return usagef("addr: standard input cannot be both the dump and the text to symbolize")
	}
	stdin := len(pos) == 2 && pos[1] == "-"
	if *outFormat != "text" && *outFormat != "json" {
		return usagef("addr: --format %q: want text or json", *outFormat)
	}
	if stdin && *outFormat != "text" {
		return usagef(`addr: "-" annotates text as it comes: --format json is for ADDR queries`)
	}
	asJSON := *outFormat == "json"
	var queries []addrQuery
	if !stdin {
		for _, a := range pos[1:] {
			q, err := parseAddrArg(a)
			if err != nil {
				return err
			}
			queries = append(queries, q)
		}
	}
	s, err := c.open(pos[:1], stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	arch := s.Dump().Arch()
	digits, minAddr := addrShape(s)
	format := c.formatter()
	resolved := 0
	lk := reportingLookuper{s.Chain(), &c.rep}
	err = s.Phase("output", func() error {
		if stdin {
			check := &oops.Check{}
			if in := s.Dump().Info(); in != nil {
				check.Release = in.OSRelease()
			}
			check.KASLR, check.HasKASLR = s.KASLROffset()
			o := oops.New(oops.Options{Resolver: lk, Digits: digits, MinAddr: minAddr, Addresses: *addresses, Format: format,
				ReturnAddrs: arch.ReturnAddressFrames(), Check: check})
			err := o.Stream(stdinText, stdout)
			resolved = o.Resolved()
			if o.Unresolved() > 0 {
				c.rep.miss(fmt.Sprintf("%d addresses in the text", o.Unresolved()))
			}
			if sum := check.Summary(); sum != "" {
				c.rep.disagree(sum)
			}
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, q := range queries {
			addrs := []uint64{q.addr}
			if q.symbol {
				var why string
				if addrs, why = resolveSymbolic(lk, q); len(addrs) == 0 {
					c.rep.miss(fmt.Sprintf("%q (%s)", q.arg, why))
					if asJSON {
						if err := enc.Encode(addrJSON{Query: q.arg, Error: why}); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(stdout, "%s ?\n", q.arg)
					continue
				}
			}
			for _, addr := range addrs {
				sym, err := lk.Lookup(addr)
				hexAddr := fmt.Sprintf("0x%0*x", digits, addr)
				if err != nil {
					c.rep.miss(fmt.Sprintf("address %#x", addr))
					if asJSON {
						if err := enc.Encode(addrJSON{Query: q.arg, Addr: &hexAddr, Error: "no symbol holds it"}); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(stdout, "%0*x ?\n", digits, addr)
					continue
				}
				resolved++
				if asJSON {
					off := addr - sym.Addr
					j := addrJSON{Query: q.arg, Addr: &hexAddr, Symbol: sym.Name, Offset: &off, Module: sym.Module, Source: sym.Finder, Formatted: format(sym, addr)}
					if sym.Size != 0 {
						j.Size = &sym.Size
					}
					if err := enc.Encode(j); err != nil {
						return err
					}
					continue
				}
				if c.rep.verbose && sym.Finder != "" {
					// -v: which finder answered (the dump's or a file's).
					fmt.Fprintf(stdout, "%0*x %s\t(%s)\n", digits, addr, format(sym, addr), sym.Finder)
					continue
				}
				fmt.Fprintf(stdout, "%0*x %s\n", digits, addr, format(sym, addr))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Unresolved addresses are an answer while some finder worked.
	return c.rep.finish(stderr, resolved > 0 || !c.rep.explained())
}

// isFileFinder reports the finders over files the user gave.
func isFileFinder(name string) bool {
	return name == kdumpsyms.FinderVMLinux || name == kdumpsyms.FinderSystemMap || name == kdumpsyms.FinderKallsymsFile
}

// dumpFinders returns the chain's enabled finders over the dump itself.
func dumpFinders(c *symfinder.Chain) []symfinder.Finder {
	var out []symfinder.Finder
	for _, st := range c.Finders() {
		if f, ok := c.Finder(st.Name); ok && st.Enabled && !isFileFinder(st.Name) {
			out = append(out, f)
		}
	}
	return out
}

// dumpHas reports whether one of the finders over the dump has sym (its
// name, address and module); it stops at the first that does.
func dumpHas(fs []symfinder.Finder, sym symfinder.Symbol) bool {
	found := false
	for _, f := range fs {
		_ = f.Find(symfinder.Query{Kind: symfinder.ByName, Name: sym.Name}, func(o symfinder.Symbol) bool {
			found = o.Addr == sym.Addr && o.Module == sym.Module
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// addrJSON is one line of addr --format json: a query and its answer, or
// why there is none.
type addrJSON struct {
	Query     string  `json:"query"`
	Addr      *string `json:"addr"` // hex; null when a symbolic query named none
	Symbol    string  `json:"symbol,omitempty"`
	Offset    *uint64 `json:"offset,omitempty"`
	Size      *uint64 `json:"size,omitempty"` // omitted when unknown
	Module    string  `json:"module,omitempty"`
	Source    string  `json:"source,omitempty"`    // the finder that answered
	Formatted string  `json:"formatted,omitempty"` // as the kernel prints it: sym+0xoff/0xsize [mod]
	Error     string  `json:"error,omitempty"`
}

func moduleSuffix(m string) string {
	if m == "" {
		return ""
	}
	return " in " + m
}

func cmdName(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("name", "name [flags] VMCORE NAME...")
	c.register(fs)
	glob := fs.Bool("glob", false, "NAMEs are shell patterns (*, ?, [...])")
	re := fs.Bool("regexp", false, "NAMEs are regular expressions (RE2, matched anywhere; anchor with ^ and $)")
	format := fs.String("format", "kallsyms", "output `format`: "+strings.Join(formats, ", "))
	module := fs.String("module", "", "only symbols of module `NAME` (vmlinux: the core kernel); NAME may also be given as MODULE:NAME")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("name: want VMCORE and at least one name")
	}
	if *glob && *re {
		return usagef("name: --glob and --regexp exclude each other")
	}
	var match []func(string) bool
	var mods []string // each NAME's module filter
	names := slices.Clone(pos[1:])
	for i, n := range names {
		mod, name := splitModuleName(n)
		if mod == "" {
			mod = *module
		} else if *module != "" && mod != *module {
			return usagef("name: %q names module %s, --module says %s", n, mod, *module)
		}
		mods = append(mods, mod)
		names[i] = name
		n = name
		switch {
		case *glob:
			if _, err := path.Match(n, ""); err != nil {
				return usagef("name: bad pattern %q: %v", n, err)
			}
			match = append(match, func(s string) bool { ok, _ := path.Match(n, s); return ok })
		case *re:
			r, err := regexp.Compile(n)
			if err != nil {
				return usagef("name: bad regexp %q: %v", n, err)
			}
			match = append(match, r.MatchString)
		}
	}
	s, err := c.open(pos[:1], stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	sw, err := newSymbolWriter(stdout, *format, s.Dump().Arch().PtrSize)
	if err != nil {
		return usageError{err.Error()}
	}
	write := func(sym symfinder.Symbol) error {
		if c.demangle {
			sym.Name = demangleName(sym.Name)
		}
		return sw.write(sym)
	}
	found := 0
	err = s.Phase("output", func() error {
		if match != nil {
			matched := make([]bool, len(match))
			for sym, err := range s.Chain().All() {
				if err != nil {
					c.rep.add(err)
					continue
				}
				for i, m := range match {
					if moduleMatches(mods[i], sym.Module) && m(sym.Name) {
						matched[i] = true
						found++
						if err := write(sym); err != nil {
							return err
						}
						break
					}
				}
			}
			for i, f := range matched {
				if !f {
					c.rep.miss(fmt.Sprintf("pattern %q", pos[1+i]))
				}
			}
			return sw.flush()
		}
		for i, n := range names {
			syms, err := s.Chain().Find(symfinder.Query{Kind: symfinder.ByName, Name: n})
			syms = slices.DeleteFunc(syms, func(sym symfinder.Symbol) bool { return !moduleMatches(mods[i], sym.Module) })
			if err == nil && len(syms) == 0 {
				err = fmt.Errorf("no symbol %s%s: %w", n, moduleSuffix(mods[i]), symfinder.ErrNotFound)
			}
			if err != nil {
				c.rep.add(err)
				c.rep.miss(fmt.Sprintf("name %q", pos[1+i]))
				continue
			}
			found++
			for _, sym := range syms {
				if err := write(sym); err != nil {
					return err
				}
			}
		}
		return sw.flush()
	})
	if err != nil {
		return err
	}
	return c.rep.finish(stderr, found > 0 || !c.rep.explained())
}

// readVMCOREINFOFile reads a --vmcoreinfo file: VMCOREINFO text, at most
// vmcoreinfo.MaxSize bytes, that parses.
func readVMCOREINFOFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, vmcoreinfo.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("--vmcoreinfo %s: %w", name, err)
	}
	if len(text) > vmcoreinfo.MaxSize {
		return nil, fmt.Errorf("--vmcoreinfo %s: larger than %d bytes: %w", name, vmcoreinfo.MaxSize, vmcoreinfo.ErrCorrupt)
	}
	if _, err := vmcoreinfo.Parse(text); err != nil {
		return nil, fmt.Errorf("--vmcoreinfo %s: %w", name, err)
	}
	return text, nil
}
