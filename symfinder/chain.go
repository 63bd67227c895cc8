package symfinder

import (
	"errors"
	"fmt"
	"iter"
	"slices"
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

// first asks each enabled finder in turn and returns the first hit. Errors
// of finders that failed are returned with ErrNotFound when nothing was
// found, and dropped when a later finder answered.
func (c *Chain) first(q Query) (Symbol, error) {
	var errs []error
	for _, f := range c.enabled() {
		var s Symbol
		found := false
		err := f.Find(q, func(sym Symbol) bool { s, found = sym, true; return false })
		if found {
			return s, nil
		}
		if err != nil {
			errs = append(errs, &FinderError{Finder: f.Name(), Err: err})
		}
	}
	var what string
	if q.Kind == ByAddr {
		what = fmt.Sprintf("address %#x", q.Addr)
	} else {
		what = fmt.Sprintf("name %q", q.Name)
	}
	return Symbol{}, errors.Join(append([]error{fmt.Errorf("symfinder: %s: %w", what, ErrNotFound)}, errs...)...)
}

// Lookup returns the best symbol containing addr: the first hit of the
// first enabled finder that has one. Finding nothing is an error wrapping
// ErrNotFound (joined with the errors of finders that failed).
func (c *Chain) Lookup(addr uint64) (Symbol, error) { return c.first(Query{Kind: ByAddr, Addr: addr}) }

// LookupName returns the first symbol named name, as Lookup does.
func (c *Chain) LookupName(name string) (Symbol, error) {
	return c.first(Query{Kind: ByName, Name: name})
}

// Find returns every hit of every enabled finder for q, in finder order. It
// fails only when nothing was found: with ErrNotFound, joined with the
// errors of finders that could not be consulted.
func (c *Chain) Find(q Query) ([]Symbol, error) {
	var out []Symbol
	var errs []error
	for _, f := range c.enabled() {
		if err := f.Find(q, func(s Symbol) bool { out = append(out, s); return true }); err != nil {
			errs = append(errs, &FinderError{Finder: f.Name(), Err: err})
		}
	}
	if len(out) == 0 {
		return nil, errors.Join(append([]error{fmt.Errorf("symfinder: %v: %w", q.Kind, ErrNotFound)}, errs...)...)
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
			err := f.Find(Query{Kind: All}, func(s Symbol) bool {
				if !yield(s, nil) {
					stopped = true
					return false
				}
				return true
			})
			if stopped {
				return
			}
			if err != nil && !yield(Symbol{}, &FinderError{Finder: f.Name(), Err: err}) {
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
