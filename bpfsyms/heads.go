package bpfsyms

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Code lets the loaders find a list head that kallsyms does not hold. The
// heads are data symbols, which a kernel built without
// CONFIG_KALLSYMS_ALL leaves out of its symbol table, but its text
// symbols are always there, and the functions /proc/kallsyms itself calls
// to print these lines (bpf_get_kallsym, kprobe_get_kallsym,
// ftrace_mod_get_kallsym) name the heads in their code. A head is then
// the one address that the code of every such function refers to and
// that validates as the list it should be; anything else is an error.
type Code struct {
	// Func returns the extent [start, end) of a kernel function, false
	// when the symbol table does not have it.
	Func func(name string) (start, end uint64, ok bool)
	// Refs returns the addresses the code at pc may refer to: a superset
	// of its real references (internal/coderef), every one validated
	// before use.
	Refs func(pc uint64, code []byte) ([]uint64, error)
}

// Head says where a list head came from.
type Head struct {
	Symbol string // the kernel's name for it, e.g. "bpf_kallsyms"
	Addr   uint64
	// How is "the symbol table", or "the code of f, g" when it was found
	// through the functions that use it.
	How string
}

// Caps of the search through code.
const (
	// maxFunc caps the code read of one function: the helpers searched
	// are a few hundred bytes; an extent beyond this is a symbol table
	// gap, not a function.
	maxFunc = 16 << 10
	// maxCandidates caps the addresses validated for one head.
	maxCandidates = 4096
	// dataSpan bounds where a head may lie: above _etext, within the
	// kernel image's data, which follows the text (x86) or the init
	// sections (arm64); kernel images stay far below 256 MiB.
	dataSpan = 256 << 20
)

// headSpec names a list head and the functions whose code refers to it.
type headSpec struct {
	sym string
	// in are the functions that use the head: the first must be in the
	// symbol table; each further one present narrows the candidates to
	// the addresses all of them refer to.
	in []string
	// not are heads found before that this one is not.
	not []uint64
	// why says what an absent symbol may mean, for the error.
	why string
	// empty, where set, tells whether the list a candidate holds has no
	// entries. Candidates that all hold empty lists give the same output
	// whichever is the head, so their ambiguity is no failure.
	empty func(c uint64) (bool, error)
}

// locate returns the address of the list head spec.sym: from the symbol
// table, else through the code of spec.in (see Code), where valid decides
// whether an address holds the list. Errors wrap ErrMissingInfo when the
// head cannot be found or is ambiguous, or are the faults of reading the
// functions' code.
func (ld *loader) locate(spec headSpec, valid func(c uint64) error) (uint64, error) {
	if a, ok := ld.syms(spec.sym); ok {
		ld.heads = append(ld.heads, Head{Symbol: spec.sym, Addr: a, How: "the symbol table"})
		return a, nil
	}
	if ld.code == nil || ld.code.Func == nil || ld.code.Refs == nil {
		return ld.symbol(spec.sym, spec.why)
	}
	if _, _, ok := ld.code.Func(spec.in[0]); !ok {
		return ld.symbol(spec.sym, spec.why+"; nor "+spec.in[0]+" in its text symbols")
	}
	lo, ok := ld.syms("_etext")
	if !ok {
		return ld.symbol(spec.sym, spec.why+"; nor _etext to bound the kernel's data")
	}
	hi := lo + dataSpan
	var sets [][]uint64
	var used []string
	for _, f := range spec.in {
		refs, err := ld.refs(f, lo, hi)
		if err != nil {
			return 0, err
		}
		if refs != nil {
			sets, used = append(sets, refs), append(used, f)
		}
	}
	// The addresses every function refers to; if a later function's code
	// was decoded without the head, the first function's alone.
	try := [][]uint64{intersect(sets), sets[0]}
	if len(sets) == 1 {
		try = try[1:]
	}
	var nearest error
	tried := 0
	for i, cands := range try {
		var found []uint64
		for _, c := range cands {
			if slices.Contains(spec.not, c) {
				continue
			}
			if tried++; tried > maxCandidates {
				return 0, missing("%s: not in the symbol table, and the code of %s refers to more than %d addresses", spec.sym, strings.Join(used, ", "), maxCandidates)
			}
			if err := valid(c); err != nil {
				nearest = err
				continue
			}
			found = append(found, c)
		}
		how := "the code of " + strings.Join(used, ", ")
		if i > 0 {
			how = "the code of " + used[0]
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			ld.heads = append(ld.heads, Head{Symbol: spec.sym, Addr: found[0], How: how})
			return found[0], nil
		default:
			if ld.allEmpty(spec, found) {
				how += fmt.Sprintf(" (one of %d candidates %s, each an empty list: the output is the same whichever it is)", len(found), hexList(found, 4))
				ld.heads = append(ld.heads, Head{Symbol: spec.sym, Addr: found[0], How: how})
				return found[0], nil
			}
			return 0, missing("%s: not in the symbol table, and %s refers to %d addresses that each hold such a list (%#x, %#x): ambiguous", spec.sym, how, len(found), found[0], found[1])
		}
	}
	if nearest == nil {
		nearest = fmt.Errorf("no address in [%#x, %#x)", lo, hi)
	}
	return 0, missing("%s: not in the symbol table, and none of the %d addresses the code of %s refers to holds the list (last: %v)", spec.sym, tried, strings.Join(used, ", "), nearest)
}

// allEmpty reports whether every candidate in found holds an empty list,
// so that choosing any of them cannot change what is read; false when spec
// cannot tell or a candidate cannot be read.
func (ld *loader) allEmpty(spec headSpec, found []uint64) bool {
	if spec.empty == nil {
		return false
	}
	for _, c := range found {
		if e, err := spec.empty(c); err != nil || !e {
			return false
		}
	}
	return true
}

// hexList formats up to n addresses of as, and how many more there are.
func hexList(as []uint64, n int) string {
	var b strings.Builder
	for i, a := range as[:min(n, len(as))] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%#x", a)
	}
	if len(as) > n {
		fmt.Fprintf(&b, " and %d more", len(as)-n)
	}
	return b.String()
}

// refs returns the pointer-aligned addresses in [lo, hi) that the code of
// function f refers to, or nil when the symbol table lacks f.
func (ld *loader) refs(f string, lo, hi uint64) ([]uint64, error) {
	start, end, ok := ld.code.Func(f)
	if !ok {
		return nil, nil
	}
	if end <= start || end-start > maxFunc {
		end = start + maxFunc
	}
	code := make([]byte, end-start)
	if err := memory.ReadFull(ld.kmem, code, start); err != nil {
		return nil, fmt.Errorf("bpfsyms: code of %s at %#x: %w", f, start, err)
	}
	all, err := ld.code.Refs(start, code)
	if err != nil {
		return nil, fmt.Errorf("bpfsyms: code of %s: %w", f, err)
	}
	out := []uint64{}
	for _, a := range all {
		if a >= lo && a < hi && a%ld.ptr == 0 {
			out = append(out, a)
		}
	}
	return out, nil
}

// intersect returns the addresses in every one of the sorted sets.
func intersect(sets [][]uint64) []uint64 {
	out := sets[0]
	for _, s := range sets[1:] {
		var next []uint64
		for _, a := range out {
			if _, ok := slices.BinarySearch(s, a); ok {
				next = append(next, a)
			}
		}
		out = next
	}
	return out
}

// ring validates a list head at c: empty (both links point back at c), or
// with a first and a last node whose links agree with the head's in both
// directions, each checked by node when it is not nil.
func (ld *loader) ring(c uint64, node func(n uint64) error) error {
	n, err := ld.pointer(c + ld.next)
	if err != nil {
		return err
	}
	p, err := ld.pointer(c + ld.prev)
	if err != nil {
		return err
	}
	if n == c || p == c {
		if n != p {
			return corrupt("list head at %#x: next %#x, prev %#x", c, n, p)
		}
		return nil
	}
	for _, x := range []uint64{n, p} {
		if x == 0 || x%ld.ptr != 0 {
			return corrupt("list head at %#x: wild pointer %#x", c, x)
		}
	}
	if back, err := ld.pointer(n + ld.prev); err != nil || back != c {
		return corrupt("list head at %#x: its first node %#x does not point back", c, n)
	}
	if fwd, err := ld.pointer(p + ld.next); err != nil || fwd != c {
		return corrupt("list head at %#x: its last node %#x does not point back", c, p)
	}
	if node == nil {
		return nil
	}
	if err := node(n); err != nil {
		return err
	}
	if p != n {
		return node(p)
	}
	return nil
}

// empty reports whether the list at head has no nodes.
func (ld *loader) empty(head uint64) (bool, error) {
	n, err := ld.pointer(head + ld.next)
	if err != nil {
		return false, fmt.Errorf("bpfsyms: list head at %#x: %w", head, err)
	}
	return n == head, nil
}
