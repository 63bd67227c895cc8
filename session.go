package kdumpsyms

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/crash"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/tasks"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// Finder names of the sources a Session puts in its chain.
const (
	FinderKallsyms     = kallsyms.FinderName // "kallsyms"
	FinderModules      = modsyms.FinderName  // "modules"
	FinderVMLinux      = "vmlinux"
	FinderSystemMap    = "system.map"
	FinderKallsymsFile = "kallsyms-file"
)

// Options adjust Open. The zero value decodes everything the dump holds,
// expanding the kallsyms tables on first use.
type Options struct {
	// Dump is passed to vmcore.OpenWith.
	Dump vmcore.Options
	// Lazy decodes kallsyms names on demand instead of expanding the whole
	// table on first use (see kallsyms.Lazy).
	Lazy bool
	// Kallsyms tunes the kallsyms decoder; its Lazy field is set from
	// Lazy, and the fields its Target leaves unknown from the dump's.
	Kallsyms kallsyms.Options
	// Layout is where struct offsets come from for the module, ftrace, BPF
	// and kprobes sources; nil means the dump's own, as Layouts says.
	Layout btflayout.Source
	// Layouts says where struct offsets come from when Layout is nil.
	Layouts LayoutMode
	// VMLinux, SystemMap and KallsymsFile name extra symbol files, added to
	// the chain after the dump's own sources as "vmlinux", "system.map" and
	// "kallsyms-file". vmlinux and System.map addresses are shifted by the
	// dump's KASLR offset (VMCOREINFO's KERNELOFFSET).
	VMLinux, SystemMap, KallsymsFile string
}

// Session is an open dump and the symbol sources read from it.
//
// A Session is safe for concurrent use: reads of kernel memory, which the
// lazily loaded sources perform, are serialized.
type Session struct {
	dump  *vmcore.Dump
	chain *symfinder.Chain
	opt   Options
	stats *Stats

	// The session is a cache: each of these is "pkg.Func(inputs), done
	// once" (sync.OnceValues), set by newSession.
	kernel   func() (kernelMem, error)
	kallsyms func() (*kallsyms.Result, error)
	modules  func() (*modsyms.Set, error)
	crash    func() *crash.Facts
	kaslr    func() (uint64, bool)

	laySt layState // session_layout.go

	pseudoSt pseudoState // ftrace, bpf, kprobes (session_bpf.go)

	orcSt orcState // the modules' ORC tables (session_unwind.go)

	tasksOnce func() (*tasks.List, error) // session_tasks.go
	armSt     armState                    // 32-bit ARM unwind tables (session_armunwind.go)
}

// kernelMem is the kernel's memory and the machine description settled
// with it (see target).
type kernelMem struct {
	r   memory.Reader
	tgt memory.Target
}

// Open opens the dump in paths (one file, or the parts of a split dump) and
// builds its symbol chain. Nothing is decoded until a symbol is asked for,
// except the extra symbol files named in opt, which are read now.
//
// Errors are those of vmcore.OpenWith and of reading the extra files.
func Open(opt Options, paths ...string) (*Session, error) {
	st := newStats()
	t := st.begin("open")
	d, err := vmcore.OpenWith(withInfoCheck(opt.Dump), paths...)
	st.end(t)
	if err != nil {
		return nil, err
	}
	return newSession(opt, d, st)
}

func (s *Session) buildChain() (*symfinder.Chain, error) {
	c, err := symfinder.NewChain(
		&loadingFinder{name: FinderKallsyms, load: func() (symfinder.Finder, error) {
			r, err := s.Kallsyms()
			if err != nil {
				return nil, err
			}
			return r.Finder(), nil
		}},
		&loadingFinder{name: FinderModules, outside: s.outsideModuleArea, load: func() (symfinder.Finder, error) {
			set, err := s.Modules()
			if set == nil {
				return nil, err
			}
			// Modules that failed alone are reported by Modules; the
			// others still answer.
			return set, nil
		}},
	)
	if err != nil {
		return nil, err
	}
	for _, f := range s.pseudoFinders() {
		if err := c.Add(f); err != nil {
			return nil, err
		}
	}
	// A file's link-time addresses are shifted by the KASLR offset, found
	// only when a file needs it (on riscv64 it decodes kallsyms).
	if p := s.opt.VMLinux; p != "" {
		slide, _ := s.KASLROffset()
		ix, err := symfinder.OpenELFSymbols(p, slide)
		if err != nil {
			return nil, fmt.Errorf("kdumpsyms: vmlinux %s: %w", p, err)
		}
		if err := c.Add(s.checkedFile(renamed{ix, FinderVMLinux}, p)); err != nil {
			return nil, err
		}
	}
	if p := s.opt.SystemMap; p != "" {
		slide, _ := s.KASLROffset()
		f, err := openFile(p, func(fh *os.File) (symfinder.Finder, error) {
			return symfinder.ParseSystemMap(fh, FinderSystemMap, slide)
		})
		if err != nil {
			return nil, err
		}
		if err := c.Add(s.checkedFile(f, p)); err != nil {
			return nil, err
		}
	}
	if p := s.opt.KallsymsFile; p != "" {
		f, err := openFile(p, func(fh *os.File) (symfinder.Finder, error) {
			return symfinder.ParseKallsyms(fh, FinderKallsymsFile)
		})
		if err != nil {
			return nil, err
		}
		if err := c.Add(s.checkedFile(f, p)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fileSample is how many of a symbol file's global functions are compared
// with the dump's kallsyms: one disagreement shows another build, and a
// file of the same build agrees on every one.
const fileSample = 64

// checkedFile wraps a finder over a symbol file the caller gave (vmlinux,
// System.map, /proc/kallsyms text) so that on first use it is checked
// against the dump's own kallsyms: a sample of its global functions must
// be where the dump has them. A file of another build (or another boot,
// for a /proc/kallsyms copy) fails every query with a *FileMismatchError;
// when the dump's kallsyms cannot be read the file is used unchecked, as
// the only source there is.
func (s *Session) checkedFile(f symfinder.Finder, path string) symfinder.Finder {
	return &loadingFinder{name: f.Name(), load: func() (symfinder.Finder, error) {
		k, err := s.Kallsyms()
		if err != nil {
			return f, nil
		}
		var funcs []symfinder.Symbol
		_ = f.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
			if sym.Kind == 'T' && sym.Module == "" {
				funcs = append(funcs, sym)
			}
			return true
		})
		e := &FileMismatchError{Finder: f.Name(), Path: path}
		step := max(1, len(funcs)/fileSample)
		for i := 0; i < len(funcs); i += step {
			want := funcs[i]
			var got []uint64
			_ = k.Finder().Find(symfinder.Query{Kind: symfinder.ByName, Name: want.Name}, func(sym symfinder.Symbol) bool {
				got = append(got, sym.Addr)
				return true
			})
			if len(got) == 0 {
				continue // not in kallsyms (discarded, or the file's own)
			}
			e.Sampled++
			if !slices.Contains(got, want.Addr) {
				d := got[0] - want.Addr
				if e.Disagree > 0 && slices.Contains(got, want.Addr+e.Shift) {
					d = e.Shift // a name the kernel has twice: the one at that shift
				}
				if e.Disagree == 0 {
					e.Name, e.FileAddr, e.DumpAddr = want.Name, want.Addr, got[0]
					e.Shift, e.OneShift = d, true
				} else if d != e.Shift {
					e.OneShift = false
				}
				e.Disagree++
			}
		}
		e.OneShift = e.OneShift && e.Disagree == e.Sampled && e.Sampled > 1
		if e.Disagree > 0 {
			return nil, e
		}
		return f, nil
	}}
}

func openFile(path string, parse func(*os.File) (symfinder.Finder, error)) (symfinder.Finder, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: %w", err)
	}
	defer fh.Close()
	f, err := parse(fh)
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: %s: %w", path, err)
	}
	return f, nil
}

// renamed gives a finder another name.
type renamed struct {
	symfinder.Finder
	name string
}

func (r renamed) Name() string { return r.name }

// loadingFinder loads its source on the first Find and remembers the
// result, error included.
type loadingFinder struct {
	name string
	load func() (symfinder.Finder, error)
	// outside, when set, says an address can hold none of the finder's
	// symbols: a lookup there answers nothing without loading it.
	outside func(addr uint64) bool
	once    sync.Once
	f       symfinder.Finder
	err     error
}

func (l *loadingFinder) Name() string { return l.name }

func (l *loadingFinder) Find(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
	if q.Kind == symfinder.ByAddr && l.outside != nil && l.outside(q.Addr) {
		return nil
	}
	l.once.Do(func() { l.f, l.err = l.load() })
	if l.f == nil {
		return l.err
	}
	return l.f.Find(q, yield)
}

// The x86_64 module area (arch/x86/include/asm/pgtable_64_types.h):
// MODULES_VADDR is __START_KERNEL_map plus KERNEL_IMAGE_SIZE (512 MiB, or
// 1 GiB with RANDOMIZE_BASE), MODULES_END 0xffffffffff000000, with 4- and
// 5-level paging alike. Module memory of every kind, BPF JIT images,
// ftrace trampolines and kprobe instruction pages are all allocated there
// (module_alloc, execmem).
const (
	x86StartKernelMap = 0xffffffff80000000
	x86ModulesEnd     = 0xffffffffff000000
)

// outsideModuleArea reports whether addr lies where no module, BPF, ftrace
// or kprobes symbol can, so that a register or stack value that is no
// module address (a user pointer, a direct-map or stack address, an errno
// in a register, kernel data past _end) does not make the chain read the
// module list and the BTF to say "not found".
//
// On x86_64: outside the module area, whose start is taken as
// VMCOREINFO's KERNEL_IMAGE_SIZE gives it, else 1 GiB with a KASLR offset
// and 512 MiB without (a kernel booted with nokaslr may have 1 GiB: the
// lower start keeps its modules inside). On arm64, riscv64 and ppc64: user
// space, the lower half, and the linear map the translation found
// (linearMap). Elsewhere (s390x, whose kernel and user address spaces
// overlap, and the 32-bit architectures) it knows nothing and reports
// false.
func (s *Session) outsideModuleArea(addr uint64) bool {
	arch := s.dump.Arch().Name
	switch arch {
	case "x86_64", "arm64", "riscv64", "ppc64", "ppc64le":
	default:
		return false
	}
	if _, err := s.Kallsyms(); err != nil {
		// The finders need kallsyms: let them load and report that, so
		// that the failure explains the address no finder answered.
		return false
	}
	switch arch {
	case "x86_64":
		size := uint64(512 << 20)
		if in := s.dump.Info(); in != nil {
			if v, ok := in.Number("KERNEL_IMAGE_SIZE"); ok && v > 0 && v <= 1<<30 {
				size = v
			} else if off, _ := in.KernelOffset(); off != 0 {
				size = 1 << 30
			}
		}
		return addr < x86StartKernelMap+size || addr >= x86ModulesEnd
	}
	// arm64, riscv64 and ppc64 keep user space in the lower half of the
	// address space and every kernel mapping in the upper half, and
	// allocate module memory outside their linear map: arm64 at or above
	// PAGE_END since v5.4 (module area, BPF JIT region, vmalloc), below
	// PAGE_OFFSET before (the linear map was the upper half); ppc64 from
	// VMALLOC_START, where its linear map ends; riscv64 in the 2 GiB below
	// the kernel image, or below PAGE_OFFSET before v5.13.
	return addr < 1<<63 || s.linearMap(addr)
}

// linearMap reports whether addr lies in the linear map the translation
// uses: its fast path starting at the direct map's base. False when the
// translation has none (or, on arm64 with 52-bit VA_BITS on 48-bit
// hardware, starts it above PAGE_OFFSET).
func (s *Session) linearMap(addr uint64) bool {
	t, err := s.dump.Translator()
	if err != nil {
		return false
	}
	l := t.Layout()
	if l.DirectMap == 0 {
		return false
	}
	for _, f := range l.FastPaths {
		if f.Start == l.DirectMap {
			return addr >= f.Start && addr <= f.Last
		}
	}
	return false
}

// Dump returns the open dump.
func (s *Session) Dump() *vmcore.Dump { return s.dump }

// Chain returns the session's finder chain. Callers may add, remove,
// enable, disable and reorder finders.
func (s *Session) Chain() *symfinder.Chain { return s.chain }

// Stats returns the time, kernel memory read and heap of each phase done so
// far.
func (s *Session) Stats() []Phase { return s.stats.phases() }

// Phase records what callers such as the CLI do outside the session (for
// example writing output) in the same statistics.
func (s *Session) Phase(name string, f func() error) error {
	t := s.stats.begin(name)
	err := f()
	s.stats.end(t)
	return err
}

// KASLROffset returns how far the kernel was moved from its link-time
// address: VMCOREINFO's KERNELOFFSET. Where the kernel writes none, it is
// found where the dump determines it: on riscv64, from NUMBER(KERNEL_LINK_ADDR)
// and _start, the image's first symbol (decoding kallsyms); on 32-bit ARM,
// which has no KASLR, 0. It is unknown (false) elsewhere: i386 writes no
// KERNELOFFSET although it randomizes.
func (s *Session) KASLROffset() (uint64, bool) { return s.kaslr() }

func (s *Session) findKASLROffset() (uint64, bool) {
	in := s.dump.Info()
	if in == nil {
		return 0, false
	}
	if off, ok := in.KernelOffset(); ok {
		return off, true
	}
	switch s.dump.Arch().Name {
	case "arm":
		return 0, true
	case "riscv64":
		link, ok := in.Number("KERNEL_LINK_ADDR")
		if !ok {
			return 0, false
		}
		k, err := s.Kallsyms()
		if err != nil {
			return 0, false
		}
		var start []uint64
		_ = k.Finder().Find(symfinder.Query{Kind: symfinder.ByName, Name: "_start"}, func(sym symfinder.Symbol) bool {
			start = append(start, sym.Addr)
			return true
		})
		if len(start) != 1 || start[0] < link {
			return 0, false
		}
		return start[0] - link, true
	}
	return 0, false
}

// Kernel returns the dump's kernel virtual memory, safe for concurrent use.
func (s *Session) Kernel() (memory.Reader, error) {
	k, err := s.kernel()
	return k.r, err
}

// loadKernel builds the kernel address space (Kernel, once).
func (s *Session) loadKernel() (kernelMem, error) {
	t := s.stats.begin("translation")
	defer s.stats.end(t)
	k := kernelMem{tgt: s.dump.Arch().Target}
	tr, err := s.dump.Translator()
	if err != nil {
		return k, err
	}
	k.r = &lockedReader{r: tr, st: s.stats}
	if k.tgt.PageSize == 0 {
		// The dump names no page size, but the translation knows the
		// one it walks by.
		k.tgt.PageSize = tr.Layout().PageSize
	}
	return k, nil
}

// target is the one description of the dump's machine that the session
// gives every decoder: the dump's Arch().Target, its page size completed
// by the translation's when the dump names none. It is settled, once,
// with the kernel's memory.
func (s *Session) target() memory.Target {
	k, _ := s.kernel()
	return k.tgt
}

// Kallsyms decodes the core kernel's symbols, once.
func (s *Session) Kallsyms() (*kallsyms.Result, error) { return s.kallsyms() }

func (s *Session) loadKallsyms() (*kallsyms.Result, error) {
	kmem, err := s.Kernel()
	if err != nil {
		return nil, &NeedsError{Source: FinderKallsyms, Needs: NeedTranslation, Err: err}
	}
	t := s.stats.begin("kallsyms")
	defer s.stats.end(t)
	opt := s.opt.Kallsyms
	opt.Lazy = s.opt.Lazy
	// The session's target, where the caller left a field unknown.
	opt.Target = opt.Target.Or(s.target())
	return kallsyms.Load(kmem, s.dump.Info(), opt)
}

// Modules walks the module list, once. When some modules fail alone the Set
// lists them with their errors and the error returned joins them; a nil Set
// means nothing could be read.
func (s *Session) Modules() (*modsyms.Set, error) { return s.modules() }

func (s *Session) loadModules() (*modsyms.Set, error) {
	k, err := s.Kallsyms()
	if err != nil {
		return nil, &NeedsError{Source: FinderModules, Needs: FinderKallsyms, Err: err}
	}
	kmem, _ := s.Kernel()
	syms := modsyms.FromFinder(k.Finder())
	lay, err := s.moduleLayout()
	if err != nil {
		return nil, &NeedsError{Source: FinderModules, Needs: NeedLayouts, Err: err}
	}
	head, err := s.moduleHead()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: modules: %w", err)
	}
	opt := modsyms.Options{Target: s.target(), Layout: lay, Head: head, TypeInSize: s.typeInSize()}
	t := s.stats.begin("modules")
	set, err := modsyms.Load(kmem, syms, opt)
	s.stats.end(t)
	if s.opt.Layout != nil && set != nil {
		// Layouts the caller gave (a BTF file, a table) may be another
		// kernel's: checked against the modules they read, not trusted.
		if ferr := set.CheckFit(s.opt.Layout.Describe()); ferr != nil {
			return nil, ferr
		}
	}
	return set, err
}

// Close closes the dump.
func (s *Session) Close() error { return s.dump.Close() }

// lockedReader serializes reads of a reader that is not safe for
// concurrent use and counts the bytes read.
type lockedReader struct {
	mu sync.Mutex
	r  memory.Reader
	st *Stats
}

func (l *lockedReader) ReadAt(p []byte, addr uint64) (int, error) {
	l.mu.Lock()
	n, err := l.r.ReadAt(p, addr)
	l.mu.Unlock()
	l.st.addBytes(uint64(n))
	return n, err
}

// Phase is one step of the work a session did.
type Phase struct {
	Name      string
	Duration  time.Duration
	BytesRead uint64 // kernel virtual memory read during the phase
	HeapAlloc uint64 // bytes allocated on the heap during the phase
}

// Stats accumulates phases. Phases may nest (a lazy load inside "output"):
// each phase counts what happened while it ran.
type Stats struct {
	mu    sync.Mutex
	list  []Phase
	bytes uint64
}

type phaseStart struct {
	name  string
	at    time.Time
	bytes uint64
	alloc uint64
}

func newStats() *Stats { return &Stats{} }

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func (st *Stats) begin(name string) phaseStart {
	st.mu.Lock()
	b := st.bytes
	st.mu.Unlock()
	return phaseStart{name: name, at: time.Now(), bytes: b, alloc: heapAlloc()}
}

func (st *Stats) end(p phaseStart) {
	d := time.Since(p.at)
	alloc := heapAlloc() - p.alloc
	st.mu.Lock()
	defer st.mu.Unlock()
	st.list = append(st.list, Phase{Name: p.name, Duration: d, BytesRead: st.bytes - p.bytes, HeapAlloc: alloc})
}

func (st *Stats) addBytes(n uint64) {
	st.mu.Lock()
	st.bytes += n
	st.mu.Unlock()
}

func (st *Stats) phases() []Phase {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Phase(nil), st.list...)
}
