package symfinder

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
)

// Chain asks an ordered list of named finders, as drgn's symbol finder list
// does: for one result the first enabled finder with a hit wins; for all
// results every enabled finder's hits are joined in finder order. Finders
// can be added, inserted, removed, enabled, disabled and reordered by name
// at any time; a Chain is safe for concurrent use.
type Chain struct {
	mu      sync.RWMutex
	entries []chainEntry

	failMu   sync.Mutex
	failures []*FinderError // the first failure of each finder, in the order they happened
}

type chainEntry struct {
	f       Finder
	enabled bool
}

// FinderState describes one finder of a chain.
type FinderState struct {
	Name    string
	Enabled bool
}

// NewChain returns a chain of the given finders, all enabled, in order.
// Finder names must be unique; a duplicate is an error.
func NewChain(fs ...Finder) (*Chain, error) {
	c := &Chain{}
	for _, f := range fs {
		if err := c.Add(f); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Chain) find(name string) int {
	return slices.IndexFunc(c.entries, func(e chainEntry) bool { return e.f.Name() == name })
}

// Add appends an enabled finder. Adding a second finder of the same name is
// an error.
func (c *Chain) Add(f Finder) error { return c.Insert(-1, f) }

// Insert puts an enabled finder at position i (0 first; -1 or past the end
// appends).
func (c *Chain) Insert(i int, f Finder) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.find(f.Name()) >= 0 {
		return fmt.Errorf("symfinder: a finder named %q is already in the chain", f.Name())
	}
	if i < 0 || i > len(c.entries) {
		i = len(c.entries)
	}
	c.entries = slices.Insert(c.entries, i, chainEntry{f: f, enabled: true})
	return nil
}

// Remove takes the named finder out of the chain and reports whether it was
// there.
func (c *Chain) Remove(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.find(name)
	if i < 0 {
		return false
	}
	c.entries = slices.Delete(c.entries, i, i+1)
	return true
}

// SetEnabled enables or disables the named finder. An unknown name is an
// error wrapping ErrNotFound.
func (c *Chain) SetEnabled(name string, on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.find(name)
	if i < 0 {
		return fmt.Errorf("symfinder: no finder named %q: %w", name, ErrNotFound)
	}
	c.entries[i].enabled = on
	return nil
}

// SetOrder makes exactly the named finders enabled, in that order, ahead of
// the disabled rest (drgn's set_enabled_symbol_finders). An unknown name is
// an error wrapping ErrNotFound and changes nothing.
func (c *Chain) SetOrder(names ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]chainEntry, 0, len(c.entries))
	for _, n := range names {
		i := c.find(n)
		if i < 0 {
			return fmt.Errorf("symfinder: no finder named %q: %w", n, ErrNotFound)
		}
		if slices.ContainsFunc(out, func(e chainEntry) bool { return e.f.Name() == n }) {
			return fmt.Errorf("symfinder: finder %q named twice", n)
		}
		out = append(out, chainEntry{f: c.entries[i].f, enabled: true})
	}
	for _, e := range c.entries {
		if !slices.Contains(names, e.f.Name()) {
			out = append(out, chainEntry{f: e.f, enabled: false})
		}
	}
	c.entries = out
	return nil
}

// Finders lists the chain's finders in order.
func (c *Chain) Finders() []FinderState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]FinderState, len(c.entries))
	for i, e := range c.entries {
		out[i] = FinderState{Name: e.f.Name(), Enabled: e.enabled}
	}
	return out
}

// Finder returns the named finder.
func (c *Chain) Finder(name string) (Finder, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := c.find(name); i >= 0 {
		return c.entries[i].f, true
	}
	return nil, false
}

func (c *Chain) enabled() []Finder {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Finder
	for _, e := range c.entries {
		if e.enabled {
			out = append(out, e.f)
		}
	}
	return out
}

// FinderError reports a finder that could not be consulted.
type FinderError struct {
	Finder string
	Err    error
}

func (e *FinderError) Error() string { return "symfinder: " + e.Finder + ": " + e.Err.Error() }
func (e *FinderError) Unwrap() error { return e.Err }

// NotFoundError is a chain's answer to a query no enabled finder has a
// symbol for. Unconsulted names the finders that could not be consulted
// (their errors are in Chain.Failures, each once): the symbol may be
// theirs, so the miss is not an answer about the kernel. It matches
// ErrNotFound, and stays one short line however many finders failed.
type NotFoundError struct {
	What        string // "address 0x…", "name \"…\"", "by name"
	Unconsulted []string
}

func (e *NotFoundError) Error() string {
	s := "symfinder: " + e.What + ": " + ErrNotFound.Error()
	if len(e.Unconsulted) > 0 {
		s += " (not consulted: " + strings.Join(e.Unconsulted, ", ") + "; see Chain.Failures)"
	}
	return s
}

// Is reports ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// fail records that finder f could not be consulted; each finder's first
// failure is kept.
func (c *Chain) fail(f Finder, err error) *FinderError {
	fe := &FinderError{Finder: f.Name(), Err: err}
	c.failMu.Lock()
	defer c.failMu.Unlock()
	for _, old := range c.failures {
		if old.Finder == fe.Finder {
			return old
		}
	}
	c.failures = append(c.failures, fe)
	return fe
}

// Failures returns every finder that could not be consulted by a query so
// far, each once with its first error, in the order they failed. A lookup
// that misses only names them (NotFoundError.Unconsulted), so that a
// caller reports each root cause once.
func (c *Chain) Failures() []*FinderError {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return slices.Clone(c.failures)
}

// first asks each enabled finder in turn and returns the first hit. When
// nothing was found the error is a *NotFoundError naming the finders that
// failed (recorded for Failures).
func (c *Chain) first(q Query) (Symbol, error) {
	var failed []string
	for _, f := range c.enabled() {
		var s Symbol
		found := false
		err := f.Find(q, func(sym Symbol) bool { s, found = sym, true; return false })
		s.Finder = f.Name()
		if found {
			return s, nil
		}
		if err != nil {
			failed = append(failed, c.fail(f, err).Finder)
		}
	}
	var what string
	if q.Kind == ByAddr {
		what = fmt.Sprintf("address %#x", q.Addr)
	} else {
		what = fmt.Sprintf("name %q", q.Name)
	}
	return Symbol{}, &NotFoundError{What: what, Unconsulted: failed}
}

// Lookup returns the best symbol containing addr: the first hit of the
// first enabled finder that has one. Finding nothing is a *NotFoundError
// (it matches ErrNotFound); finders that failed are named in it and their
// errors kept in Failures.
func (c *Chain) Lookup(addr uint64) (Symbol, error) { return c.first(Query{Kind: ByAddr, Addr: addr}) }

// LookupName returns the first symbol named name, as Lookup does.
func (c *Chain) LookupName(name string) (Symbol, error) {
	return c.first(Query{Kind: ByName, Name: name})
}

// Find returns every hit of every enabled finder for q, in finder order. It
// fails only when nothing was found: with a *NotFoundError naming the
// finders that could not be consulted (their errors in Failures).
func (c *Chain) Find(q Query) ([]Symbol, error) {
	var out []Symbol
	var failed []string
	for _, f := range c.enabled() {
		name := f.Name()
		if err := f.Find(q, func(s Symbol) bool { s.Finder = name; out = append(out, s); return true }); err != nil {
			failed = append(failed, c.fail(f, err).Finder)
		}
	}
	if len(out) == 0 {
		what := q.Kind.String()
		switch q.Kind {
		case ByAddr:
			what = fmt.Sprintf("address %#x", q.Addr)
		case ByName:
			what = fmt.Sprintf("name %q", q.Name)
		}
		return nil, &NotFoundError{What: what, Unconsulted: failed}
	}
	return out, nil
}

// All yields every symbol of every enabled finder, finder by finder in
// chain order, each in its own order. A finder that fails yields its error
// once (with a zero Symbol) and the iteration goes on with the next.
func (c *Chain) All() iter.Seq2[Symbol, error] {
	return func(yield func(Symbol, error) bool) {
		for _, f := range c.enabled() {
			stopped := false
			name := f.Name()
			err := f.Find(Query{Kind: All}, func(s Symbol) bool {
				s.Finder = name
				if !yield(s, nil) {
					stopped = true
					return false
				}
				return true
			})
			if stopped {
				return
			}
			if err != nil && !yield(Symbol{}, c.fail(f, err)) {
				return
			}
		}
	}
}

// SymbolsNamed returns every symbol named name, of every enabled finder in
// chain order (drgn's symbols(name)): one kernel can have several static
// symbols of a name, in vmlinux and in modules. Finding none is an error
// wrapping ErrNotFound.
func (c *Chain) SymbolsNamed(name string) ([]Symbol, error) {
	return c.Find(Query{Kind: ByName, Name: name})
}

// SymbolsAt returns every symbol containing addr, of every enabled finder
// in chain order, each finder's best first (drgn's symbols(address)).
// Finding none is an error wrapping ErrNotFound.
func (c *Chain) SymbolsAt(addr uint64) ([]Symbol, error) {
	return c.Find(Query{Kind: ByAddr, Addr: addr})
}
