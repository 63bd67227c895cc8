package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitUnresolved = 3
)

const usageText = `kdump-syms recovers a Linux kernel's symbols from a crash dump (vmcore),
with no vmlinux and no debug info.

Usage:
  kdump-syms all     [flags] VMCORE            every symbol, as /proc/kallsyms printed it
  kdump-syms addr    [flags] VMCORE ADDR...    symbolize addresses, or NAME+0xOFF [MOD] in reverse ("-": an oops on stdin)
  kdump-syms name    [flags] VMCORE NAME...    symbols by name (MOD:NAME, --module, --glob, --regexp)
  kdump-syms info    [flags] VMCORE            what the dump is and how it was decoded
  kdump-syms modules [flags] VMCORE            the module list, like /proc/modules
  kdump-syms extract [flags] -o OUT VMCORE     a small dump holding only what decoding reads

VMCORE is an ELF core (/proc/vmcore, makedumpfile -E, QEMU dump-guest-memory),
a kdump-compressed file (makedumpfile, QEMU; flattened too), optionally
wrapped in xz, zstd or gzip; name the other parts of a split dump with --part.
Run "kdump-syms COMMAND --help" for a command's flags.

Exit status: 0 ok, 1 error, 2 usage, 3 some queries unresolved.
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
	demangle     bool
	started      time.Time
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

func run(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout, stderr)
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
		fmt.Fprintf(stderr, "kdump-syms: %v\n", err)
		return exitError
	}
}

// exitCode ends a command with a status and no message.
type exitCode int

func (e exitCode) Error() string { return "exit " + strconv.Itoa(int(e)) }

func dispatch(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return usagef("no command")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	case "all":
		return cmdAll(args, stdout, stderr)
	case "addr":
		return cmdAddr(args, stdout, stderr)
	case "name":
		return cmdName(args, stdout, stderr)
	case "info":
		return cmdInfo(args, stdout, stderr)
	case "modules":
		return cmdModules(args, stdout, stderr)
	case "extract":
		return cmdExtract(args, stdout, stderr)
	}
	fmt.Fprint(stderr, usageText)
	return usagef("unknown command %q", cmd)
}

func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kdump-syms %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a command's arguments. --help prints the command's
// usage on stdout and is success; a bad flag is a usage error, with the
// usage on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	usage := fs.Usage
	fs.Usage = func() {}
	pos, err := parseInterspersed(fs, args)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, err
	}
	if err != nil {
		fs.Usage()
		return nil, usageError{err.Error()}
	}
	return pos, nil
}

// open opens the session for a command whose first positional argument is
// the dump.
func (c *common) open(dumpPaths []string, stderr io.Writer) (*kdumpsyms.Session, error) {
	c.started = time.Now()
	paths := append(slices.Clone(dumpPaths), c.parts...)
	stop := progress(stderr, "opening "+paths[0])
	s, err := kdumpsyms.Open(kdumpsyms.Options{
		Lazy:         c.lazy,
		VMLinux:      c.vmlinux,
		SystemMap:    c.systemMap,
		KallsymsFile: c.kallsymsFile,
	}, paths...)
	stop()
	if err != nil {
		return nil, err
	}
	if c.finders != "" {
		if err := s.Chain().SetOrder(strings.Split(c.finders, ",")...); err != nil {
			s.Close()
			return nil, usagef("--finders: %v", err)
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
	ptr := s.Dump().Arch().PtrSize
	sw, err := newSymbolWriter(stdout, *format, ptr)
	if err != nil {
		return usageError{err.Error()}
	}
	var failed []error
	printed := 0
	err = s.Phase("output", func() error {
		var mapSyms []symfinder.Symbol
		for sym, err := range s.Chain().All() {
			if err != nil {
				failed = append(failed, err)
				continue
			}
			if !moduleMatches(*module, sym.Module) {
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
			slide, _ := s.KASLROffset()
			for _, sym := range systemMap(mapSyms, slide, ptr) {
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
	if *module != "" && printed == 0 && len(failed) == 0 {
		fmt.Fprintf(stderr, "kdump-syms: no symbols of module %q\n", *module)
		return exitCode(exitUnresolved)
	}
	// Modules that failed alone were skipped; say so.
	if set, merr := s.Modules(); set != nil && merr != nil {
		failed = append(failed, merr)
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	return nil
}

func cmdAddr(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("addr", "addr [flags] VMCORE ADDR|NAME+0xOFF[/0xSIZE] [MOD]... | addr [flags] VMCORE -")
	c.register(fs)
	addresses := fs.Bool("addresses", false, `with "-": add the address of each symbolic frame (sym+off [mod]), for objdump or gdb`)
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
	stdin := len(pos) == 2 && pos[1] == "-"
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
	digits := 16
	var minAddr uint64 = 1 << 63
	if arch.PtrSize == 4 {
		digits, minAddr = 8, 0x80000000
	}
	if arch.Name == "s390x" {
		minAddr = 0 // the kernel runs at low addresses
	}
	format := c.formatter()
	unresolved := 0
	err = s.Phase("output", func() error {
		if stdin {
			o := &oopsReader{r: s.Chain(), digits: digits, minAddr: minAddr, addresses: *addresses, format: format,
				returnAddrs: arch.Name == "x86_64" || arch.Name == "i386"}
			err := o.symbolizeStream(stdinReader, stdout)
			unresolved = o.unresolved
			return err
		}
		for _, q := range queries {
			addrs := []uint64{q.addr}
			if q.symbol {
				if addrs = resolveSymbolic(s.Chain(), q); len(addrs) == 0 {
					unresolved++
					fmt.Fprintf(stderr, "kdump-syms: %q: no symbol %s%s\n", q.arg, q.name, moduleSuffix(q.module))
					fmt.Fprintf(stdout, "%s ?\n", q.arg)
					continue
				}
			}
			for _, addr := range addrs {
				sym, err := s.Chain().Lookup(addr)
				if err != nil {
					unresolved++
					fmt.Fprintf(stderr, "kdump-syms: %v\n", err)
					fmt.Fprintf(stdout, "%0*x ?\n", digits, addr)
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
	if unresolved > 0 {
		return exitCode(exitUnresolved)
	}
	return nil
}

func moduleSuffix(m string) string {
	if m == "" {
		return ""
	}
	return " in " + m
}

// stdinReader is the text "addr -" symbolizes; tests replace it.
var stdinReader io.Reader = os.Stdin

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
	unresolved := 0
	err = s.Phase("output", func() error {
		if match != nil {
			found := make([]bool, len(match))
			for sym, err := range s.Chain().All() {
				if err != nil {
					fmt.Fprintf(stderr, "kdump-syms: %v\n", err)
					continue
				}
				for i, m := range match {
					if moduleMatches(mods[i], sym.Module) && m(sym.Name) {
						found[i] = true
						if err := write(sym); err != nil {
							return err
						}
						break
					}
				}
			}
			for i, f := range found {
				if !f {
					unresolved++
					fmt.Fprintf(stderr, "kdump-syms: no symbol matches %q\n", pos[1+i])
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
				unresolved++
				fmt.Fprintf(stderr, "kdump-syms: %q: %v\n", pos[1+i], err)
				continue
			}
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
	if unresolved > 0 {
		return exitCode(exitUnresolved)
	}
	return nil
}
