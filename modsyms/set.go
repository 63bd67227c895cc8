package modsyms

import (
	"sync"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// FinderName is the name of the combined finder over all modules.
const FinderName = "modules"

// Set is the modules of one dump in list order (the order /proc/modules
// and /proc/kallsyms print them), and a symfinder.Finder over all their
// symbols. It is immutable and safe for concurrent use.
type Set struct {
	mods []*Module
	err  error
}

func newSet(mods []*Module) *Set { return &Set{mods: mods} }

// Modules returns every module of the list except unformed ones, in list
// order, including those whose symbols failed to load (Err set).
func (s *Set) Modules() []*Module { return s.mods }

// Module returns the named module.
func (s *Set) Module(name string) (*Module, bool) {
	for _, m := range s.mods {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}

// Finders returns the index of every module whose symbols loaded, in list
// order; each is a symfinder.Finder named "module:NAME".
func (s *Set) Finders() []*symfinder.Index {
	var out []*symfinder.Index
	for _, m := range s.mods {
		if m.Symbols != nil {
			out = append(out, m.Symbols)
		}
	}
	return out
}

// Err joins the errors of the modules that failed and of a broken list
// walk; nil when everything loaded.
func (s *Set) Err() error { return s.err }

// Name implements symfinder.Finder; it returns "modules".
func (s *Set) Name() string { return FinderName }

// Find implements symfinder.Finder over every loaded module: by address
// and by name the modules answer in list order; All yields module after
// module in list order and each module's symbols in symtab order, exactly
// the module part of /proc/kallsyms.
//
// After yielding what the loaded modules hold, Find returns Err(): a
// non-nil error says some modules could not be consulted. A Chain ignores
// it when another hit was found and reports it otherwise.
func (s *Set) Find(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
	stopped := false
	y := func(sym symfinder.Symbol) bool {
		if !yield(sym) {
			stopped = true
			return false
		}
		return true
	}
	for _, m := range s.mods {
		if m.Symbols == nil {
			continue
		}
		_ = m.Symbols.Find(q, y)
		if stopped {
			return nil
		}
	}
	return s.err
}

// Lazy is a symfinder.Finder named "modules" that loads the module list
// (and, by default, the dump's BTF) on its first Find. It is safe for
// concurrent use.
type Lazy struct {
	load func() (*Set, error)
	once sync.Once
	set  *Set
	err  error
}

// NewLazy returns a finder that calls Load(kmem, syms, opt) on first use.
func NewLazy(kmem memory.Reader, syms Symbols, opt Options) *Lazy {
	return &Lazy{load: func() (*Set, error) { return Load(kmem, syms, opt) }}
}

// Load loads the modules on the first call and returns Load's result on
// every call.
func (z *Lazy) Load() (*Set, error) {
	z.once.Do(func() { z.set, z.err = z.load() })
	return z.set, z.err
}

// Name implements symfinder.Finder.
func (z *Lazy) Name() string { return FinderName }

// Find implements symfinder.Finder: it loads on first use, then answers
// as Set.Find does. When nothing could be loaded it returns the load error.
func (z *Lazy) Find(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
	set, err := z.Load()
	if set == nil {
		return err
	}
	return set.Find(q, yield)
}
