package symfinder

import (
	"cmp"
	"fmt"
	"slices"
)

// Range is a span of addresses [Start, End) in which an Index answers
// lookups by address the way the kernel's kallsyms does (see
// Builder.SetExtents): for vmlinux the kernel's is_ksym_addr ranges
// (_stext…_end with CONFIG_KALLSYMS_ALL, else _stext…_etext and
// _sinittext…_einittext), for a module each of its memory regions.
type Range struct {
	Start, End uint64
	// EndIncluded makes End itself part of the range: kernels before 5.16
	// compared addr <= _end (and <= _etext, <= _einittext).
	EndIncluded bool
	// SizesOnly makes the range bound the sizes of the symbols in it
	// without answering lookups by address: x86_64's zero-based per-CPU
	// area, whose offsets are not addresses the kernel resolves.
	SizesOnly bool
	// ToNextSymbol lets an extent run on to the next symbol even past End,
	// End bounding only the highest symbol: the kernel's get_symbol_pos
	// for vmlinux, which on kernels before 5.16 answers End itself with
	// the size up to whatever symbol follows. Module regions bound every
	// extent.
	ToNextSymbol bool
}

// Contains reports whether a lies in r.
func (r Range) Contains(a uint64) bool {
	return a >= r.Start && (a < r.End || r.EndIncluded && a == r.End)
}

func (r Range) String() string {
	c := ")"
	if r.EndIncluded {
		c = "]"
	}
	s := fmt.Sprintf("[%#x, %#x%s", r.Start, r.End, c)
	if r.SizesOnly {
		s += " sizes only"
	}
	return s
}

// SkippedInModuleLookups reports the symbols the kernel's module address
// lookup (find_kallsyms_symbol) passes over: mapping symbols and local
// labels (is_mapping_symbol: "$x", "$d", ".L…", "L0…"), and absolute ones,
// which in a module are its per-CPU variables (type 'a', addresses in the
// per-CPU area, outside the module's memory).
func SkippedInModuleLookups(kind byte, name []byte) bool {
	if isAbsolute(kind) || len(name) == 0 {
		return true
	}
	return name[0] == '$' || len(name) >= 2 && (name[0] == '.' && name[1] == 'L' || name[0] == 'L' && name[1] == '0')
}

// SetExtents makes the index answer lookups by address as the kernel
// does: an address is found only inside one of ranges (sorted, disjoint;
// SizesOnly ranges bound sizes but answer nothing), and the symbol found
// is the highest at or below it in the same range, covering up to the
// next higher symbol or the range's end, whichever comes first: the
// kernel's get_symbol_pos for vmlinux and find_kallsyms_symbol for
// modules. Symbol.Size is then that extent, the size the kernel prints
// with %pS, and Symbol.ELFSize the recorded size (AddSized), if any.
//
// skip, if not nil, names the symbols that neither answer a lookup by
// address nor bound another's extent (see SkippedInModuleLookups); they
// keep their place in All and ByName. Without SetExtents an index derives
// sizes from the next higher address (Add) or uses the recorded ones
// (AddSized), with no bound: the exact ranges of BPF programs and
// trampolines.
func (b *Builder) SetExtents(ranges []Range, skip func(kind byte, name []byte) bool) {
	b.ranges, b.skip, b.extents = slices.Clone(ranges), skip, true
}

// finishExtents validates the ranges and marks skipped symbols.
func (ix *Index) finishExtents(ranges []Range, skip func(byte, []byte) bool) error {
	for i, r := range ranges {
		if r.End < r.Start || r.End == r.Start && !r.EndIncluded {
			return fmt.Errorf("symfinder: %s: empty or reversed range %v", ix.name, r)
		}
		if i > 0 && !(ranges[i-1].End < r.Start || ranges[i-1].End == r.Start && !ranges[i-1].EndIncluded) {
			return fmt.Errorf("symfinder: %s: ranges %v and %v overlap or are out of order", ix.name, ranges[i-1], r)
		}
	}
	ix.ranges = slices.Clip(ranges)
	if ix.ranges == nil {
		ix.ranges = []Range{} // extents with no range: nothing answers
	}
	if skip == nil {
		return nil
	}
	for i := range ix.n {
		if skip(ix.Kind(i), ix.NameBytes(i)) {
			if ix.skipped == nil {
				ix.skipped = make([]uint64, (ix.n+63)/64)
			}
			ix.skipped[i/64] |= 1 << (i % 64)
		}
	}
	return nil
}

// RangeOf returns the range of rs holding a; lookup passes over SizesOnly
// ranges.
func RangeOf(rs []Range, a uint64, lookup bool) (Range, bool) {
	for _, r := range rs {
		if r.Contains(a) && !(lookup && r.SizesOnly) {
			return r, true
		}
	}
	return Range{}, false
}

// Ranges returns the ranges set by SetExtents (nil without).
func (ix *Index) Ranges() []Range { return slices.Clone(ix.ranges) }

func (ix *Index) isSkipped(i int) bool {
	return ix.skipped != nil && ix.skipped[i/64]&(1<<(i%64)) != 0
}

// rangeAt returns the range holding a; lookup skips SizesOnly ranges.
func (ix *Index) rangeAt(a uint64, lookup bool) (Range, bool) {
	rs := ix.ranges
	// The first range whose end is at or above a.
	k, _ := slices.BinarySearchFunc(rs, a, func(r Range, a uint64) int {
		if r.End < a {
			return -1
		}
		return 1
	})
	for ; k < len(rs) && rs[k].Start <= a; k++ {
		if rs[k].Contains(a) && !(lookup && rs[k].SizesOnly) {
			return rs[k], true
		}
	}
	return Range{}, false
}

// nextAboveEligible returns the lowest address above a of a symbol that is
// not skipped, from position p on (the first position above a).
func (ix *Index) nextAboveEligible(p int) (uint64, bool) {
	for ; p < ix.n; p++ {
		if !ix.isSkipped(ix.sorted(p)) {
			return ix.addrAt(p), true
		}
	}
	return 0, false
}

// extentSize is the kernel's size of the symbol at a inside r: up to the
// next higher symbol, or r's end.
func (ix *Index) extentSize(a uint64, r Range) uint64 {
	end := r.End
	if next, ok := ix.nextAboveEligible(ix.upper(a)); ok && (next < end || r.ToNextSymbol) {
		end = next
	}
	return end - a
}

// findExtent answers a lookup by address under SetExtents.
func (ix *Index) findExtent(a uint64, yield func(Symbol) bool) {
	r, ok := ix.rangeAt(a, true)
	if !ok {
		return
	}
	p := ix.upper(a)
	q := p - 1
	for q >= 0 && ix.isSkipped(ix.sorted(q)) {
		q--
	}
	if q < 0 {
		return
	}
	start := ix.addrAt(q)
	if start < r.Start {
		return // the extent would cross the range's start
	}
	end := r.End
	if next, ok := ix.nextAboveEligible(p); ok && (next < end || r.ToNextSymbol) {
		end = next
	}
	g := q
	for g > 0 && ix.addrAt(g-1) == start {
		g--
	}
	for ; g <= q; g++ {
		i := ix.sorted(g)
		if ix.isSkipped(i) {
			continue
		}
		if !yield(ix.symbol(i, end-start, true)) {
			return
		}
	}
}

// sizeExtent is Size under SetExtents.
func (ix *Index) sizeExtent(i int) (uint64, bool, bool) {
	if ix.isSkipped(i) {
		// No extent: the recorded size, else unknown (a module's per-CPU
		// symbol would otherwise stretch to its module's text).
		if ix.sizes != nil {
			return ix.sizes[i], false, true
		}
		return 0, false, true
	}
	a := ix.addr(i)
	r, ok := ix.rangeAt(a, false)
	if !ok {
		return 0, false, false
	}
	return ix.extentSize(a, r), true, true
}

// KernelRanges returns the ranges in which the kernel resolves an address
// to a vmlinux symbol (kernel/kallsyms.c is_ksym_addr), given the
// addresses of the kernel's section symbols: _stext…_end when the
// symbols include _end (CONFIG_KALLSYMS_ALL, which also keeps data
// symbols), else _stext…_etext and _sinittext…_einittext. Kernels before
// 5.16 included the end address (inclusiveEnds). A zero-based per-CPU
// area below _stext (__per_cpu_start…__per_cpu_end, x86_64 before 6.15)
// is added as a SizesOnly range: its symbols are offsets, which the
// kernel never resolves, but their sizes end with the area. nil means
// sym has no _stext, or neither _end nor _etext (an index whose sizes are
// then derived without bound).
func KernelRanges(sym func(name string) (uint64, bool), inclusiveEnds bool) []Range {
	stext, ok := sym("_stext")
	_, hasEnd := sym("_end")
	_, hasEtext := sym("_etext")
	if !ok || !hasEnd && !hasEtext {
		return nil
	}
	var rs []Range
	if pcs, ok := sym("__per_cpu_start"); ok {
		if pce, ok := sym("__per_cpu_end"); ok && pcs <= pce && pce < stext {
			rs = append(rs, Range{Start: pcs, End: pce, EndIncluded: true, SizesOnly: true})
		}
	}
	if end, ok := sym("_end"); ok && end > stext {
		return append(rs, Range{Start: stext, End: end, EndIncluded: inclusiveEnds, ToNextSymbol: true})
	}
	etext, ok := sym("_etext")
	if !ok || etext <= stext {
		return rs
	}
	rs = append(rs, Range{Start: stext, End: etext, EndIncluded: inclusiveEnds, ToNextSymbol: true})
	if si, ok := sym("_sinittext"); ok {
		if ei, ok := sym("_einittext"); ok && si < ei {
			rs = append(rs, Range{Start: si, End: ei, EndIncluded: inclusiveEnds, ToNextSymbol: true})
		}
	}
	// Sorted, and disjoint whatever the symbols say: a range overlapping
	// one before it is dropped.
	slices.SortStableFunc(rs, func(a, b Range) int { return cmp.Compare(a.Start, b.Start) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && !(out[n-1].End < r.Start || out[n-1].End == r.Start && !out[n-1].EndIncluded) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// kernelSectionNames are the symbols KernelRanges asks for.
var kernelSectionNames = [...]string{"_stext", "_etext", "_sinittext", "_einittext", "_end", "__per_cpu_start", "__per_cpu_end"}

// IsKernelSectionName reports whether KernelRanges asks for name.
func IsKernelSectionName(name []byte) bool {
	for _, n := range kernelSectionNames {
		if string(name) == n {
			return true
		}
	}
	return false
}
