package kdumpsyms

import (
	"sync"

	"github.com/kdumpsyms/kdumpsyms/bpfsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/coderef"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Finder names of the pseudo-module sources, after "modules" in the chain
// and in the order /proc/kallsyms prints them.
const (
	FinderFtrace  = bpfsyms.FinderFtrace  // "ftrace"
	FinderBPF     = bpfsyms.FinderBPF     // "bpf"
	FinderKprobes = bpfsyms.FinderKprobes // "kprobes"
)

// pseudoState holds the pseudo-module sources of a session, each loaded
// once, and the struct layouts they share.
type pseudoState struct {
	once [3]sync.Once
	sets [3]*bpfsyms.Set
	errs [3]error
}

// The pseudo-module sources, in /proc/kallsyms order.
var pseudoSources = [3]struct {
	name string
	load func(memory.Reader, bpfsyms.Symbols, bpfsyms.Options) (*bpfsyms.Set, error)
}{
	{FinderFtrace, bpfsyms.LoadFtrace},
	{FinderBPF, bpfsyms.LoadBPF},
	{FinderKprobes, bpfsyms.LoadKprobes},
}

// pseudoFinders returns the lazily loaded "ftrace", "bpf" and "kprobes"
// finders for the chain.
func (s *Session) pseudoFinders() []symfinder.Finder {
	out := make([]symfinder.Finder, len(pseudoSources))
	for i, src := range pseudoSources {
		out[i] = &loadingFinder{name: src.name, outside: s.outsideModuleArea, load: func() (symfinder.Finder, error) {
			set, err := s.pseudo(i)
			if set == nil {
				return nil, err
			}
			// Entries that failed alone are reported by the set's Find.
			return set, nil
		}}
	}
	return out
}

// Ftrace reads ftrace's symbols (saved module init functions and
// trampolines), once. See bpfsyms.LoadFtrace for what a nil Set and the
// error mean.
func (s *Session) Ftrace() (*bpfsyms.Set, error) { return s.pseudo(0) }

// BPF reads the BPF JIT symbols of the kernel's bpf_kallsyms list, once.
// See bpfsyms.LoadBPF.
func (s *Session) BPF() (*bpfsyms.Set, error) { return s.pseudo(1) }

// Kprobes reads the kprobe instruction-slot pages, once. See
// bpfsyms.LoadKprobes.
func (s *Session) Kprobes() (*bpfsyms.Set, error) { return s.pseudo(2) }

// textExtent returns the extent of a function of f: its address and the
// kernel's size for it, up to the next symbol.
func textExtent(f symfinder.Finder) func(name string) (start, end uint64, ok bool) {
	return func(name string) (start, end uint64, ok bool) {
		_ = f.Find(symfinder.Query{Kind: symfinder.ByName, Name: name}, func(sym symfinder.Symbol) bool {
			if sym.Kind != 't' && sym.Kind != 'T' {
				return true
			}
			start, end, ok = sym.Addr, sym.Addr+sym.Size, sym.Size > 0 && sym.Addr+sym.Size > sym.Addr
			return !ok
		})
		return start, end, ok
	}
}

func (s *Session) pseudo(i int) (*bpfsyms.Set, error) {
	p := &s.pseudoSt
	p.once[i].Do(func() {
		name := pseudoSources[i].name
		k, err := s.Kallsyms()
		if err != nil {
			p.errs[i] = &NeedsError{Source: name, Needs: FinderKallsyms, Err: err}
			return
		}
		syms := bpfsyms.Symbols(modsyms.FromFinder(k.Finder()))
		lay, err := s.layout()
		if err != nil {
			p.errs[i] = &NeedsError{Source: name, Needs: NeedLayouts, Err: err}
			return
		}
		kmem, _ := s.Kernel()
		arch := s.dump.Arch()
		opt := bpfsyms.Options{Target: s.target(), Layout: lay}
		if coderef.Supported(arch.Name) {
			opt.Code = &bpfsyms.Code{
				Func: textExtent(k.Finder()),
				Refs: func(pc uint64, code []byte) ([]uint64, error) { return coderef.Refs(arch.Name, pc, code) },
			}
		}
		t := s.stats.begin(name)
		p.sets[i], p.errs[i] = pseudoSources[i].load(kmem, syms, opt)
		s.stats.end(t)
	})
	return p.sets[i], p.errs[i]
}
