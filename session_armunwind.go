package kdumpsyms

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/internal/coderef"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/unwind"
)

// armState holds where a 32-bit ARM kernel's unwind tables are, and the
// modules', each found once.
type armState struct {
	once sync.Once
	tab  unwind.ARMTables
	how  string
	err  error

	modOnce sync.Once
	mods    []unwind.ARMIndex
	modErr  error
}

// Bounds of the search for the ARM unwind tables.
const (
	// armMaxCandidates caps the addresses the code of the unwinder's
	// functions may name that are tried as ends of the index.
	armMaxCandidates = 512
	// armMaxModuleTables caps the unwind_tables list: one table per
	// module text section (.text, .init.text while the module
	// initialises).
	armMaxModuleTables = 8192
	// armExtabSpan bounds where an index entry's .ARM.extab entry may be:
	// .ARM.unwind_tab follows .ARM.unwind_idx in the image
	// (arch/arm/kernel/vmlinux.lds.h, ARM_UNWIND_SECTIONS).
	armExtabSpan = 16 << 20
)

// armIndexFuncs are the functions whose code names __start_unwind_idx and
// __stop_unwind_idx (arch/arm/kernel/unwind.c: unwind_find_idx, which GCC
// inlines into unwind_frame), and armListFuncs those that name the
// modules' unwind_tables list (unwind_table_add's list_add_tail).
var (
	armIndexFuncs = []string{"unwind_find_idx", "unwind_frame"}
	armListFuncs  = []string{"unwind_table_add"}
)

// ARMTables returns a 32-bit ARM kernel's unwind tables (CONFIG_ARM_UNWIND):
// vmlinux's index, by the symbols __start_unwind_idx and __stop_unwind_idx
// or, without CONFIG_KALLSYMS_ALL, through the code of the unwinder that
// uses them (docs/formats.md §12), and a loader of the modules' (the
// kernel's unwind_tables list). The string says how vmlinux's was found.
func (s *Session) ARMTables() (unwind.ARMTables, string, error) {
	st := &s.armSt
	st.once.Do(func() { st.tab, st.how, st.err = s.findARMTables() })
	return st.tab, st.how, st.err
}

// armText returns the kernel's text, [_text or _stext, _einittext or
// _etext): where every vmlinux index entry's function lies.
func (s *Session) armText() (lo, hi uint64, err error) {
	for _, n := range []string{"_text", "_stext"} {
		if sym, err := s.chain.LookupName(n); err == nil && (lo == 0 || sym.Addr < lo) {
			lo = sym.Addr
		}
	}
	for _, n := range []string{"_etext", "_einittext"} {
		if sym, err := s.chain.LookupName(n); err == nil && sym.Addr > hi {
			hi = sym.Addr
		}
	}
	if lo == 0 || hi <= lo {
		return 0, 0, fmt.Errorf("kdumpsyms: the kernel's text (_stext, _etext) is not in the symbol table")
	}
	return lo, hi, nil
}

func (s *Session) findARMTables() (unwind.ARMTables, string, error) {
	var t unwind.ARMTables
	lo, hi, err := s.armText()
	if err != nil {
		return t, "", err
	}
	kmem, err := s.Kernel()
	if err != nil {
		return t, "", fmt.Errorf("kdumpsyms: unwind: %w", err)
	}
	tgt := s.target()
	v := armIndexCheck{kmem: kmem, tgt: tgt, lo: lo, hi: hi}
	t.InVmlinux = func(a uint64) bool { return a >= lo && a < hi }
	t.LoadModules = s.armModules
	start, err1 := s.chain.LookupName("__start_unwind_idx")
	stop, err2 := s.chain.LookupName("__stop_unwind_idx")
	if err1 == nil && err2 == nil {
		// Named by the kernel: its ends checked, not every entry.
		if err := v.valid(start.Addr, stop.Addr, false); err != nil {
			return t, "", fmt.Errorf("kdumpsyms: the unwind index [%#x, %#x) of the symbol table: %w", start.Addr, stop.Addr, err)
		}
		t.Vmlinux = unwind.ARMIndex{Start: start.Addr, Stop: stop.Addr}
		return t, "the symbol table", nil
	}
	// Without KALLSYMS_ALL: through the unwinder's code.
	start0, stop0, how, err := s.armIndexByCode(v)
	if err != nil {
		return t, "", err
	}
	t.Vmlinux = unwind.ARMIndex{Start: start0, Stop: stop0}
	return t, how, nil
}

// armIndexByCode finds vmlinux's unwind index through the code of the
// functions that search it: the one pair [start, stop) of the addresses
// they name that holds a valid index (v).
func (s *Session) armIndexByCode(v armIndexCheck) (start, stop uint64, how string, err error) {
	lo, hi := v.lo, v.hi
	refs, used, err := s.codeRefs(armIndexFuncs)
	if err != nil {
		return 0, 0, "", fmt.Errorf("kdumpsyms: __start_unwind_idx is not in the symbol table, and %w", err)
	}
	var cands []uint64
	for _, c := range refs {
		if c%8 == 0 && c >= lo && c < hi+256<<20 {
			cands = append(cands, c)
		}
	}
	if len(cands) > armMaxCandidates {
		return 0, 0, "", fmt.Errorf("kdumpsyms: __start_unwind_idx is not in the symbol table, and the code of %s names %d addresses, more than %d", strings.Join(used, ", "), len(cands), armMaxCandidates)
	}
	var found [][2]uint64
	var last error
	for i, a := range cands {
		if v.valid(a, a+8, false) != nil { // its first entry
			continue
		}
		for _, b := range cands[i+1:] {
			if err := v.valid(a, b, false); err != nil {
				last = err
				continue
			}
			if err := v.valid(a, b, true); err != nil {
				last = err
				continue
			}
			found = append(found, [2]uint64{a, b})
		}
	}
	// The index is the whole run of entries: a pair inside another
	// that validates is part of the same table, not a second one.
	all := slices.Clone(found)
	found = slices.DeleteFunc(found, func(p [2]uint64) bool {
		for _, q := range all {
			if q != p && q[0] <= p[0] && q[1] >= p[1] {
				return true
			}
		}
		return false
	})
	how = "the code of " + strings.Join(used, ", ")
	switch len(found) {
	case 0:
		if last == nil {
			last = errors.New("no pair of them")
		}
		return 0, 0, "", fmt.Errorf("kdumpsyms: __start_unwind_idx is not in the symbol table, and none of the %d addresses %s names starts an unwind index (last: %v)", len(cands), how, last)
	case 1:
		return found[0][0], found[0][1], how, nil
	}
	return 0, 0, "", fmt.Errorf("kdumpsyms: __start_unwind_idx is not in the symbol table, and %s names %d unwind indexes ([%#x, %#x), [%#x, %#x)): ambiguous", how, len(found), found[0][0], found[0][1], found[1][0], found[1][1])
}

// codeRefs returns the addresses the code of the functions of names (those
// kallsyms has) may refer to, and the functions read.
func (s *Session) codeRefs(names []string) ([]uint64, []string, error) {
	k, err := s.Kallsyms()
	if err != nil {
		return nil, nil, err
	}
	kmem, err := s.Kernel()
	if err != nil {
		return nil, nil, err
	}
	fn := textExtent(k.Finder())
	var refs []uint64
	var used []string
	for _, n := range names {
		start, end, ok := fn(n)
		if !ok || end-start > 16<<10 {
			continue
		}
		code := make([]byte, end-start)
		if err := memory.ReadFull(kmem, code, start); err != nil {
			return nil, nil, fmt.Errorf("the code of %s: %w", n, err)
		}
		r, err := coderef.Refs(s.dump.Arch().Name, start, code)
		if err != nil {
			return nil, nil, err
		}
		refs, used = append(refs, r...), append(used, n)
	}
	if len(used) == 0 {
		return nil, nil, fmt.Errorf("none of %s is in the symbol table", strings.Join(names, ", "))
	}
	slices.Sort(refs)
	return slices.Compact(refs), used, nil
}

// armIndexCheck validates a candidate unwind index.
type armIndexCheck struct {
	kmem   memory.Reader
	tgt    memory.Target
	lo, hi uint64 // where the functions are
}

// valid checks [a, b) as an unwind index of functions in [lo, hi] (the
// linker ends it with an EXIDX_CANTUNWIND entry at the end of the text): every
// entry (all of them when full, else the first and the last) a prel31
// offset to a function there, in ascending order, and a second word that
// is EXIDX_CANTUNWIND, an inline personality routine 0 entry, or a prel31
// offset to an .ARM.extab entry past the index.
func (v armIndexCheck) valid(a, b uint64, full bool) error {
	if b <= a || (b-a)%8 != 0 || (b-a)/8 > 1<<21 {
		return fmt.Errorf("[%#x, %#x) is no table of 8-byte entries", a, b)
	}
	n := (b - a) / 8
	check := func(i uint64, e []byte, prev uint64) (uint64, error) {
		at := a + 8*i
		w0, w1 := uint32(v.tgt.Uint(e[:4])), uint32(v.tgt.Uint(e[4:8]))
		if w0&(1<<31) != 0 {
			return 0, fmt.Errorf("entry %d at %#x: %#x is no prel31 offset", i, at, w0)
		}
		fn := uint64(uint32(at) + uint32(int32(w0<<1)>>1))
		if fn < v.lo || fn > v.hi || fn < prev {
			return 0, fmt.Errorf("entry %d at %#x: function %#x out of order or outside the text [%#x, %#x)", i, at, fn, v.lo, v.hi)
		}
		switch {
		case w1 == 1, w1>>24 == 0x80:
		case w1&(1<<31) == 0:
			x := uint64(uint32(at+4) + uint32(int32(w1<<1)>>1))
			if x < b || x >= b+armExtabSpan || x%4 != 0 {
				return 0, fmt.Errorf("entry %d at %#x: extab entry %#x not after the index", i, at, x)
			}
		default:
			return 0, fmt.Errorf("entry %d at %#x: %#x is no index entry", i, at, w1)
		}
		return fn, nil
	}
	var e [8]byte
	if !full {
		var first uint64
		for _, i := range []uint64{0, n - 1} {
			if err := memory.ReadFull(v.kmem, e[:], a+8*i); err != nil {
				return err
			}
			fn, err := check(i, e[:], first)
			if err != nil {
				return err
			}
			if i == 0 {
				first = fn
			}
		}
		return nil
	}
	buf := make([]byte, 4096)
	prev := uint64(0)
	for i := uint64(0); i < n; {
		m := min(n-i, uint64(len(buf)/8))
		if err := memory.ReadFull(v.kmem, buf[:8*m], a+8*i); err != nil {
			return err
		}
		for j := range m {
			fn, err := check(i+j, buf[8*j:], prev)
			if err != nil {
				return err
			}
			prev = fn
		}
		i += m
	}
	return nil
}

// armModules reads the modules' unwind tables from the kernel's
// unwind_tables list (arch/arm/kernel/unwind.c; every table
// unwind_table_add made for a module's text sections and
// unwind_table_del did not free), found by its symbol or through the code
// of unwind_table_add. Each node is a struct unwind_table
// (arch/arm/include/asm/unwind.h): struct list_head list; (6.0 on: struct
// list_head mod_list;) const struct unwind_idx *start, *origin, *stop;
// unsigned long begin_addr, end_addr.
func (s *Session) armModules() ([]unwind.ARMIndex, error) {
	st := &s.armSt
	st.modOnce.Do(func() { st.mods, st.modErr = s.findARMModules() })
	return st.mods, st.modErr
}

func (s *Session) findARMModules() ([]unwind.ARMIndex, error) {
	kmem, err := s.Kernel()
	if err != nil {
		return nil, err
	}
	tgt := s.target()
	lo, hi, err := s.armText()
	if err != nil {
		return nil, err
	}
	names := func(a uint64) string { return "" }
	loaded := 0 // modules known to be loaded: their tables cannot all be gone
	if set, _ := s.Modules(); set != nil {
		mods := set.Modules()
		loaded = len(mods)
		names = func(a uint64) string {
			for _, m := range mods {
				for _, r := range m.Regions {
					if a >= r.Base && a-r.Base < r.Size {
						return m.Name
					}
				}
			}
			return ""
		}
	}
	// read walks the list at head with start at word first of a node.
	read1 := func(head, first uint64) ([]unwind.ARMIndex, error) {
		w := uint64(tgt.PtrSize)
		var out []unwind.ARMIndex
		prev := head
		next, err := tgt.ReadPointer(kmem, head)
		if err != nil {
			return nil, err
		}
		b := make([]byte, (first+5)*w)
		for next != head {
			if len(out) >= armMaxModuleTables {
				return nil, fmt.Errorf("more than %d tables", armMaxModuleTables)
			}
			if err := memory.ReadFull(kmem, b, next); err != nil {
				return nil, err
			}
			p := func(i uint64) uint64 { return tgt.Pointer(b[i*w:]) }
			if p(1) != prev {
				return nil, fmt.Errorf("node %#x: prev %#x, not %#x", next, p(1), prev)
			}
			t := unwind.ARMIndex{Start: p(first), Stop: p(first + 2), TextStart: p(first + 3), TextEnd: p(first + 4)}
			origin := p(first + 1)
			if t.Start > origin || origin > t.Stop || (t.Stop-t.Start)%8 != 0 || t.TextStart >= t.TextEnd ||
				(t.TextStart >= lo && t.TextStart < hi) || t.TextEnd-t.TextStart > 1<<30 {
				return nil, fmt.Errorf("node %#x: not a module's struct unwind_table (index [%#x, %#x), text [%#x, %#x))", next, t.Start, t.Stop, t.TextStart, t.TextEnd)
			}
			t.Name = names(t.TextStart)
			out = append(out, t)
			prev, next = next, p(0)
		}
		if back, err := tgt.ReadPointer(kmem, head+w); err != nil || back != prev {
			return nil, fmt.Errorf("the list's prev %#x is not its last node %#x", back, prev)
		}
		if len(out) == 0 && loaded > 0 {
			return nil, fmt.Errorf("an empty list, with %d modules loaded", loaded)
		}
		return out, nil
	}
	// struct unwind_table has had a mod_list after list since "ARM:
	// module: Add all unwind tables when load module" (2022, 6.0):
	// start at word 4; before, at word 2.
	read := func(head uint64) ([]unwind.ARMIndex, error) {
		out, err := read1(head, 4)
		if err != nil {
			if old, err2 := read1(head, 2); err2 == nil {
				return old, nil
			}
		}
		return out, err
	}
	if sym, err := s.chain.LookupName("unwind_tables"); err == nil {
		out, err := read(sym.Addr)
		if err != nil {
			return nil, fmt.Errorf("unwind_tables at %#x: %w", sym.Addr, err)
		}
		return out, nil
	}
	refs, used, err := s.codeRefs(armListFuncs)
	if err != nil {
		return nil, fmt.Errorf("unwind_tables is not in the symbol table, and %w", err)
	}
	var found []uint64
	var tabs [][]unwind.ARMIndex
	var last error
	tried := 0
	for _, c := range refs {
		if c%4 != 0 || c < hi || c >= hi+256<<20 {
			continue
		}
		if tried++; tried > armMaxCandidates {
			break
		}
		out, err := read(c)
		if err != nil {
			last = err
			continue
		}
		found, tabs = append(found, c), append(tabs, out)
	}
	how := "the code of " + strings.Join(used, ", ")
	// With no module loaded, any number of empty lists are one answer:
	// no module tables.
	if len(found) > 1 && !slices.ContainsFunc(tabs, func(t []unwind.ARMIndex) bool { return len(t) > 0 }) {
		return nil, nil
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("unwind_tables is not in the symbol table, and none of the addresses %s names holds the list (last: %v)", how, last)
	case 1:
		return tabs[0], nil
	}
	return nil, fmt.Errorf("unwind_tables is not in the symbol table, and %s names %d addresses that each hold such a list (%#x, %#x): ambiguous", how, len(found), found[0], found[1])
}
