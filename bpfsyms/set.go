package bpfsyms

import (
	"errors"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Finder names and the module names /proc/kallsyms prints for each source.
const (
	FinderFtrace  = "ftrace"
	FinderBPF     = "bpf"
	FinderKprobes = "kprobes"

	ModuleBPF     = "bpf"
	ModuleFtrace  = "__builtin__ftrace"
	ModuleKprobes = "__builtin__kprobes"
)

// Set is the symbols one loader read, in the order /proc/kallsyms prints
// them, and a symfinder.Finder over them. It is immutable and safe for
// concurrent use.
type Set struct {
	name   string
	groups []group
	err    error
	heads  []Head
}

// group is one index of a set. modMap marks the saved init functions of
// one module (ftrace), which /proc/kallsyms lists with the kernel's
// off-by-one: the first function twice, the last never.
type group struct {
	ix     *symfinder.Index
	modMap bool
}

func newSet(name string, groups []group, errs []error) *Set {
	return &Set{name: name, groups: groups, err: errors.Join(errs...)}
}

// Heads says where each list head the set was read from came from: the
// symbol table, or the code of the functions that use it (see Code).
func (s *Set) Heads() []Head { return slices.Clone(s.heads) }

// Name implements symfinder.Finder: "ftrace", "bpf" or "kprobes".
func (s *Set) Name() string { return s.name }

// Indexes returns the set's indexes in /proc/kallsyms order. A BPF or
// kprobes set has one; an ftrace set has one per module with saved init
// functions (named "ftrace:MODULE", Module the module's name) followed by
// one for the trampolines.
func (s *Set) Indexes() []*symfinder.Index {
	out := make([]*symfinder.Index, len(s.groups))
	for i, g := range s.groups {
		out[i] = g.ix
	}
	return out
}

// Len returns the number of symbols read.
func (s *Set) Len() int {
	n := 0
	for _, g := range s.groups {
		n += g.ix.Len()
	}
	return n
}

// Err joins the *EntryError and *WalkError values of what could not be
// read; nil when everything was.
func (s *Set) Err() error { return s.err }

// Find implements symfinder.Finder. By address and by name every index
// answers in order; All yields exactly the lines /proc/kallsyms prints for
// this source, in its order. After yielding, Find returns Err(): a non-nil
// error says some entries could not be read.
func (s *Set) Find(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
	for _, g := range s.groups {
		if q.Kind == symfinder.All && g.modMap {
			// ftrace_mod_get_kallsym: symnum 0 and 1 both give the first
			// function, symnum k > 1 gives function k-1.
			for i := range g.ix.Len() {
				sym := g.ix.Symbol(max(i-1, 0))
				if sym.Name != "" && !yield(sym) { // s_show skips empty names
					return nil
				}
			}
			continue
		}
		stopped := false
		_ = g.ix.Find(q, func(sym symfinder.Symbol) bool {
			if !yield(sym) {
				stopped = true
			}
			return !stopped
		})
		if stopped {
			return nil
		}
	}
	return s.err
}
