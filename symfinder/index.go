package symfinder

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"
)

// Index is an immutable symbol table stored as a struct of arrays, the form
// every built-in source produces. It keeps the source's own order (for
// kallsyms, the order /proc/kallsyms prints) and answers lookups by address
// and by name without a heap object per symbol.
//
// Per symbol it holds an address and a 4-byte offset into one names buffer
// (whose first byte per symbol is the type letter). Addresses take 4 bytes
// when the source is sorted by address and their high halves change only a
// few times (a kernel: per-CPU offsets, then the image), 8 otherwise. The
// first name lookup builds a hash table of 5–6 bytes per symbol. An
// 8-byte size is stored only for sources that record true sizes (module
// symtabs), otherwise sizes are derived from the next higher address as the
// kernel derives them. An address-order permutation exists only when the
// source order is not already sorted by address. A radix table over the
// top 4 GiB of addresses (a bucket per 8 symbols or so) leaves address
// lookups one short window to search. A kernel's index thus takes 8 bytes
// per symbol, plus 1/2 for the radix table, plus 5–6 once looked up by
// name, plus the names: at most 14.5 (13.9 measured on a 6.12 kernel).
//
// An Index is safe for concurrent use.
type Index struct {
	name   string
	module string

	n       int
	addrs   []uint64 // source order; nil when compact
	nameOff []uint32 // n+1; names[nameOff[i]] is the type letter
	names   []byte
	sizes   []uint64 // nil: derived

	// Compact addresses, for sorted indexes (every kernel source) whose
	// addresses share their high 32 bits in a few runs (per-CPU offsets,
	// then the kernel image): the low halves, and the runs.
	addrLo []uint32
	hiRuns []hiRun

	derivedEnd uint64   // end of the highest symbol when sizes are derived; 0 unknown
	byAddr     []uint32 // nil when addrs is sorted; stable by source order
	maxLast    []uint64 // sized indexes: running max of last bytes in address order
	// radix narrows address searches: radix[b] is the first position in
	// address order whose address is at least radixBase + b<<radixShift.
	// It covers the top 4 GiB of the addresses (a kernel's image, with
	// about radixPer symbols per bucket); addresses below radixBase are
	// searched among the first radix[0] positions.
	radix      []uint32
	radixBase  uint64
	radixShift uint

	// ranges and skipped are set by Builder.SetExtents (extent.go):
	// ranges is nil without it.
	ranges  []Range
	skipped []uint64 // bitset by source index; nil: none skipped

	nameOnce sync.Once
	byName   nameIndex
}

// nameIndex is a hash table of every symbol, built on the first lookup by
// name: the symbols ordered by bucket (the top bits of their name's hash),
// in source order within a bucket, and where each bucket starts. Each
// entry keeps the next hash bits as a tag above the source index, so a
// lookup compares the names of tag hits only. There are n/4 to n/2
// buckets: 5–6 bytes per symbol in all, and a lookup reads two or three
// cache lines besides the names.
type nameIndex struct {
	seed    maphash.Seed
	k       uint     // log2 of the bucket count
	idxBits uint     // bits of the source index in an entry
	start   []uint32 // 1<<k + 1 bucket starts in entries
	entries []uint32 // tag<<idxBits | source index
}

// hiRun is a run of compact addresses sharing their high 32 bits.
type hiRun struct {
	first int    // first index of the run
	hi    uint64 // the high bits, in place (low 32 bits zero)
}

// maxHiRuns bounds the runs a compact index may have: a kernel has one or
// two; more would make every address access search them.
const maxHiRuns = 8

// radixPer is the average number of symbols per radix bucket: 1/2 byte
// per symbol, and a lookup searches a line or two of addresses.
const radixPer = 8

// Builder accumulates symbols for an Index. The zero value is not usable;
// call NewBuilder.
type Builder struct {
	ix    *Index
	sized bool
	err   error

	// compact: addresses go straight into ix.addrLo and ix.hiRuns (see
	// ExpectSorted); last is the address added last.
	compact bool
	last    uint64

	extents bool
	ranges  []Range
	skip    func(kind byte, name []byte) bool
}

// NewBuilder starts an index. name is the finder name it answers to
// ("kallsyms", "module:xfs", ...); module is the Module of every symbol in
// it ("" for vmlinux).
func NewBuilder(name, module string) *Builder {
	return &Builder{ix: &Index{name: name, module: module, nameOff: []uint32{0}}}
}

// Grow reserves room for n more symbols with nameBytes more name bytes.
// Callers pass counts they have validated; Grow caps what it reserves.
func (b *Builder) Grow(n, nameBytes int) {
	const maxReserve = 1 << 22
	n, nameBytes = min(max(n, 0), maxReserve), min(max(nameBytes, 0), 16*maxReserve)
	if b.compact {
		b.ix.addrLo = slices.Grow(b.ix.addrLo, n)
	} else {
		b.ix.addrs = slices.Grow(b.ix.addrs, n)
	}
	b.ix.nameOff = slices.Grow(b.ix.nameOff, n)
	b.ix.names = slices.Grow(b.ix.names, nameBytes+n)
	if b.sized {
		b.ix.sizes = slices.Grow(b.ix.sizes, n)
	}
}

// Add appends a symbol whose size is to be derived.
func (b *Builder) Add(addr uint64, kind byte, name []byte) {
	if b.sized {
		b.ix.sizes = append(b.ix.sizes, 0)
	}
	b.add(addr, kind, name)
}

// AddSized appends a symbol of a known size. Once one symbol has a size,
// the index stores sizes for all; symbols added with Add get size 0.
func (b *Builder) AddSized(addr, size uint64, kind byte, name []byte) {
	if !b.sized {
		b.widen()
		b.sized = true
		b.ix.sizes = make([]uint64, len(b.ix.addrs), cap(b.ix.addrs))
	}
	b.ix.sizes = append(b.ix.sizes, size)
	b.add(addr, kind, name)
}

// AddString is Add for a string name.
func (b *Builder) AddString(addr uint64, kind byte, name string) {
	b.Add(addr, kind, []byte(name))
}

func (b *Builder) add(addr uint64, kind byte, name []byte) {
	b.addAddr(addr)
	b.ix.names = append(b.ix.names, kind)
	b.ix.names = append(b.ix.names, name...)
	if uint64(len(b.ix.names)) > math.MaxUint32 && b.err == nil {
		b.err = fmt.Errorf("symfinder: %s: names exceed 4 GiB", b.ix.name)
	}
	b.ix.nameOff = append(b.ix.nameOff, uint32(len(b.ix.names)))
}

// ExpectSorted tells the builder that symbols will come in address order,
// their addresses sharing the high 32 bits in a few runs, as a kernel's do
// (per-CPU offsets, then the image). It then stores 4-byte addresses from
// the start instead of compacting 8-byte ones in Build; should the
// expectation fail, it widens them and goes on. Call it before adding.
func (b *Builder) ExpectSorted() {
	if b.Len() == 0 && !b.sized {
		b.compact = true
		b.ix.addrLo = b.ix.addrLo[:0]
	}
}

func (b *Builder) addAddr(addr uint64) {
	if b.compact {
		ix := b.ix
		h := addr &^ math.MaxUint32
		n := len(ix.addrLo)
		switch {
		case n > 0 && addr < b.last:
			b.widen()
		case n == 0 || ix.hiRuns[len(ix.hiRuns)-1].hi != h:
			if len(ix.hiRuns) == maxHiRuns {
				b.widen()
				break
			}
			ix.hiRuns = append(ix.hiRuns, hiRun{first: n, hi: h})
			fallthrough
		default:
			ix.addrLo = append(ix.addrLo, uint32(addr))
			b.last = addr
			return
		}
	}
	b.ix.addrs = append(b.ix.addrs, addr)
}

// widen leaves compact mode: the addresses so far become 8-byte ones.
func (b *Builder) widen() {
	if !b.compact {
		return
	}
	ix := b.ix
	ix.n = len(ix.addrLo)
	addrs := make([]uint64, ix.n, max(cap(ix.addrLo), ix.n+1))
	for i := range addrs {
		addrs[i] = ix.addr(i)
	}
	ix.addrs, ix.addrLo, ix.hiRuns = addrs, nil, nil
	b.compact = false
}

// Len returns the number of symbols added so far.
func (b *Builder) Len() int {
	if b.compact {
		return len(b.ix.addrLo)
	}
	return len(b.ix.addrs)
}

// indexError is NewSorted's refusal of its input: the names or addresses
// a decoder took from a dump do not make an index. It matches ErrCorrupt.
type indexError struct{ msg string }

func (e *indexError) Error() string { return e.msg }

// Is reports whether target is ErrCorrupt.
func (e *indexError) Is(target error) bool { return target == ErrCorrupt || isCorruptClass(target) }

func indexErr(format string, a ...any) error { return &indexError{fmt.Sprintf(format, a...)} }

// NewSorted builds an Index of symbols whose sizes are derived, given in
// bulk, for a decoder that has produced the names buffer itself: names
// holds every symbol's type letter and name back to back, symbol i being
// names[nameOff[i]:nameOff[i+1]] (len(nameOff) is one more than the number
// of symbols, nameOff[0] is 0, and every entry is non-empty). The Index
// keeps both slices; the caller must not change them afterwards.
//
// Addresses are pulled through addrs, which fills out with the addresses
// of symbols first, first+1, ...; they must never decrease, or NewSorted
// fails. Input it cannot index is an error matching ErrCorrupt; an error
// from addrs is returned as is. end is where the highest
// symbol ends (see Builder.SetDerivedEnd). ranges, if not nil, are the
// extents of Builder.SetExtents (with no skipped symbols).
//
// It is the one bulk entry point: decoders that build names themselves
// (kallsyms) use it; everything else uses Builder.
func NewSorted(name, module string, names []byte, nameOff []uint32, addrs func(first int, out []uint64) error, end uint64, ranges []Range) (*Index, error) {
	if len(nameOff) == 0 {
		return nil, indexErr("symfinder: %s: names offsets must start at 0", name)
	}
	a, err := compactSorted(len(nameOff)-1, addrs)
	if err != nil {
		return nil, err
	}
	return newSortedFrom(name, module, a, names, nameOff, end, ranges)
}

// sortedAddrs are the addresses of an Index built in bulk (see NewSorted),
// compacted and with their search table, waiting for the names.
type sortedAddrs struct {
	ix *Index
}

// compactSorted pulls the addresses of n symbols through addrs, as
// NewSorted does, and prepares them for newSortedFrom. It touches nothing
// but what addrs does, so it may run while the caller finishes the names.
func compactSorted(n int, addrs func(first int, out []uint64) error) (*sortedAddrs, error) {
	b := NewBuilder("", "")
	b.ExpectSorted()
	ix := b.ix
	ix.addrLo = make([]uint32, 0, max(n, 0))
	const window = 4096
	buf := make([]uint64, min(window, max(n, 0)))
	for first := 0; first < n; first += window {
		out := buf[:min(window, n-first)]
		if err := addrs(first, out); err != nil {
			return nil, err
		}
		if b.compact && len(ix.hiRuns) > 0 {
			// The common case: the window continues the last run, sorted.
			hi, last := ix.hiRuns[len(ix.hiRuns)-1].hi, b.last
			lo := ix.addrLo[len(ix.addrLo) : len(ix.addrLo)+len(out)]
			j := 0
			for ; j < len(out); j++ {
				a := out[j]
				if a < last || a&^math.MaxUint32 != hi {
					break
				}
				lo[j], last = uint32(a), a
			}
			ix.addrLo, b.last = ix.addrLo[:len(ix.addrLo)+j], last
			out = out[j:]
		}
		for _, a := range out {
			if i := len(ix.addrLo) + len(ix.addrs); i > 0 && a < b.last {
				return nil, indexErr("symfinder: symbol %d at %#x is below the one before it", i, a)
			}
			b.addAddr(a)
			b.last = a
		}
	}
	if b.compact {
		ix.n = len(ix.addrLo)
		ix.addrLo = slices.Clip(ix.addrLo)
		ix.hiRuns = slices.Clip(ix.hiRuns)
	} else {
		ix.n = len(ix.addrs)
		ix.addrs = slices.Clip(ix.addrs)
		ix.compact()
	}
	ix.buildRadix()
	return &sortedAddrs{ix: ix}, nil
}

// newSortedFrom finishes the Index of a's symbols with their names (see
// NewSorted). a must not be used again.
func newSortedFrom(name, module string, a *sortedAddrs, names []byte, nameOff []uint32, end uint64, ranges []Range) (*Index, error) {
	if len(nameOff) == 0 || nameOff[0] != 0 {
		return nil, indexErr("symfinder: %s: names offsets must start at 0", name)
	}
	n := len(nameOff) - 1
	if a == nil || a.ix == nil || a.ix.n != n {
		return nil, indexErr("symfinder: %s: %d names for another number of addresses", name, n)
	}
	for i, o := range nameOff[1:] {
		if o <= nameOff[i] {
			return nil, indexErr("symfinder: %s: symbol %d has no type letter", name, i)
		}
	}
	if int(nameOff[n]) > len(names) {
		return nil, indexErr("symfinder: %s: names end at %d, past the %d-byte buffer", name, nameOff[n], len(names))
	}
	ix := a.ix
	a.ix = nil
	ix.name, ix.module = name, module
	ix.names, ix.nameOff, ix.derivedEnd = names[:nameOff[n]:nameOff[n]], nameOff, end
	if ranges != nil {
		if err := ix.finishExtents(ranges, nil); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// SetDerivedEnd sets where the highest symbol ends when sizes are derived
// (the kernel uses _end, _etext or _einittext). Without it the highest
// symbols get size 0.
func (b *Builder) SetDerivedEnd(end uint64) { b.ix.derivedEnd = end }

// Build finishes the index. The Builder must not be used afterwards.
func (b *Builder) Build() (*Index, error) {
	if b.err != nil {
		return nil, b.err
	}
	ix := b.ix
	b.ix = nil
	ix.nameOff = slices.Clip(ix.nameOff)
	ix.names = slices.Clip(ix.names)
	if b.compact {
		ix.n = len(ix.addrLo)
		ix.addrLo = slices.Clip(ix.addrLo)
		ix.hiRuns = slices.Clip(ix.hiRuns)
		ix.buildRadix()
		if err := b.finishExtents(ix); err != nil {
			return nil, err
		}
		return ix, nil
	}
	ix.addrs = slices.Clip(ix.addrs)
	if !slices.IsSorted(ix.addrs) {
		ix.byAddr = sortByAddr(ix.addrs)
	}
	if ix.sizes != nil {
		ix.maxLast = make([]uint64, len(ix.addrs))
		var run uint64
		for p := range ix.addrs {
			i := ix.sorted(p)
			last := ix.addrs[i] + max(ix.sizes[i], 1) - 1
			if last < ix.addrs[i] {
				last = math.MaxUint64
			}
			run = max(run, last)
			ix.maxLast[p] = run
		}
	}
	ix.n = len(ix.addrs)
	ix.buildRadix()
	if ix.byAddr == nil && ix.sizes == nil {
		ix.compact()
	}
	if err := b.finishExtents(ix); err != nil {
		return nil, err
	}
	return ix, nil
}

func (b *Builder) finishExtents(ix *Index) error {
	if !b.extents {
		return nil
	}
	return ix.finishExtents(b.ranges, b.skip)
}

func (ix *Index) buildRadix() {
	n := ix.n
	if n < 4*radixPer {
		return // a plain search is as fast
	}
	top := ix.addrAt(n - 1)
	floor := top - min(top, math.MaxUint32)
	p0 := ix.upper(floor - min(floor, 1)) // first position >= floor (no radix yet)
	if floor == 0 {
		p0 = 0
	}
	base := ix.addrAt(p0)
	span := top - base // the last bucket holds top
	want := uint64(max((n-p0)/radixPer, 1))
	shift := uint(0)
	for span>>shift >= want {
		shift++
	}
	buckets := int(span>>shift) + 1
	radix := make([]uint32, buckets+1)
	p := p0
	for b := range buckets {
		start := base + uint64(b)<<shift
		for p < n && ix.addrAt(p) < start {
			p++
		}
		radix[b] = uint32(p)
	}
	radix[buckets] = uint32(n)
	ix.radix, ix.radixBase, ix.radixShift = radix, base, shift
}

// compact replaces the sorted 8-byte addresses by their low halves and
// runs of high halves, when there are few runs.
func (ix *Index) compact() {
	var runs []hiRun
	for i, a := range ix.addrs {
		if h := a &^ math.MaxUint32; len(runs) == 0 || runs[len(runs)-1].hi != h {
			if len(runs) == maxHiRuns {
				return
			}
			runs = append(runs, hiRun{first: i, hi: h})
		}
	}
	lo := make([]uint32, len(ix.addrs))
	for i, a := range ix.addrs {
		lo[i] = uint32(a)
	}
	ix.addrLo, ix.hiRuns, ix.addrs = lo, runs, nil
}

// addr returns the address of the i'th symbol in source order.
func (ix *Index) addr(i int) uint64 {
	if ix.addrs != nil {
		return ix.addrs[i]
	}
	r := ix.hiRuns
	k := len(r) - 1
	for k > 0 && r[k].first > i {
		k--
	}
	return r[k].hi | uint64(ix.addrLo[i])
}

// sorted maps a position in address order to a source index.
func (ix *Index) sorted(p int) int {
	if ix.byAddr == nil {
		return p
	}
	return int(ix.byAddr[p])
}

func (ix *Index) addrAt(p int) uint64 { return ix.addr(ix.sorted(p)) }

// Name returns the finder name.
func (ix *Index) Name() string { return ix.name }

// Module returns the module every symbol of the index belongs to.
func (ix *Index) Module() string { return ix.module }

// Len returns the number of symbols.
func (ix *Index) Len() int { return ix.n }

// Addr returns the address of the i'th symbol in source order.
func (ix *Index) Addr(i int) uint64 { return ix.addr(i) }

// Kind returns the type letter of the i'th symbol.
func (ix *Index) Kind(i int) byte { return ix.names[ix.nameOff[i]] }

// NameBytes returns the name of the i'th symbol without copying; the slice
// must not be modified.
func (ix *Index) NameBytes(i int) []byte { return ix.names[ix.nameOff[i]+1 : ix.nameOff[i+1]] }

// Size returns the size of the i'th symbol and whether it was derived.
// Under SetExtents a symbol inside a range has the kernel's size: up to the
// next higher symbol or the range's end; other symbols keep their recorded
// size, or one derived from the next higher address.
func (ix *Index) Size(i int) (size uint64, derived bool) {
	if ix.ranges != nil {
		if size, derived, ok := ix.sizeExtent(i); ok {
			return size, derived
		}
	}
	if ix.sizes != nil {
		return ix.sizes[i], false
	}
	a := ix.addr(i)
	var next uint64
	var ok bool
	if ix.byAddr == nil {
		// Sorted: the next higher address follows the alias group,
		// which is short; a long one is searched.
		for j := i + 1; j < ix.n && j <= i+8; j++ {
			if b := ix.addr(j); b != a {
				next, ok = b, true
				break
			}
		}
		if !ok && i+9 < ix.n {
			next, ok = ix.nextAbove(a)
		}
	} else {
		next, ok = ix.nextAbove(a)
	}
	if !ok {
		if ix.derivedEnd > a {
			return ix.derivedEnd - a, true
		}
		return 0, true
	}
	return next - a, true
}

// upper returns the first position in address order whose address is > a.
func (ix *Index) upper(a uint64) int {
	lo, hi := 0, ix.n
	if r := ix.radix; r != nil {
		if a < ix.radixBase {
			hi = int(r[0])
		} else {
			b := (a - ix.radixBase) >> ix.radixShift
			if b >= uint64(len(r)-1) {
				return ix.n // above the highest address
			}
			// Addresses before r[b] are below the bucket, from r[b+1]
			// on above it: a's upper bound lies in between.
			lo, hi = int(r[b]), int(r[b+1])
		}
	}
	switch {
	case ix.addrs != nil && ix.byAddr == nil:
		return lo + searchWindow(ix.addrs[lo:hi], a)
	case ix.addrs == nil:
		// Compact: the positions whose high half is a's form one run
		// (or none); search its low halves.
		h := a &^ math.MaxUint32
		r := ix.hiRuns
		for k := range r {
			end := ix.n
			if k+1 < len(r) {
				end = r[k+1].first
			}
			switch {
			case r[k].hi < h:
				lo = max(lo, end)
				continue
			case r[k].hi > h:
				return max(lo, r[k].first)
			}
			lo, hi = max(lo, r[k].first), min(hi, end)
			if lo >= hi {
				return lo
			}
			return lo + searchWindow(ix.addrLo[lo:hi], uint32(a))
		}
		return max(lo, ix.n)
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ix.addrAt(m) <= a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchWindow returns the first index of sorted s whose value is above a,
// for the window a radix bucket leaves, whose lines are likely not cached:
// a branch predicted either way lets the CPU start the next load early,
// which a branch-free search, each load waiting for the one before, cannot.
func searchWindow[T uint32 | uint64](s []T, a T) int {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m] <= a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (ix *Index) nextAbove(a uint64) (uint64, bool) {
	p := ix.upper(a)
	if p == ix.n {
		return 0, false
	}
	return ix.addrAt(p), true
}

// Symbol returns the i'th symbol in source order.
func (ix *Index) Symbol(i int) Symbol {
	size, derived := ix.Size(i)
	return ix.symbol(i, size, derived)
}

func (ix *Index) symbol(i int, size uint64, derived bool) Symbol {
	name := ix.NameBytes(i)
	var elfSize uint64
	if ix.sizes != nil {
		elfSize = ix.sizes[i]
	}
	return Symbol{
		// The names buffer is never written after Build, so the string may
		// share it: returning a symbol costs no allocation.
		Name:        unsafe.String(unsafe.SliceData(name), len(name)),
		Addr:        ix.addr(i),
		Size:        size,
		SizeDerived: derived,
		ELFSize:     elfSize,
		Kind:        Kind(ix.Kind(i)),
		Module:      ix.module,
	}
}

// Find implements Finder.
func (ix *Index) Find(q Query, yield func(Symbol) bool) error {
	switch q.Kind {
	case ByAddr:
		ix.findAddr(q.Addr, yield)
	case ByName:
		ix.findName(q.Name, yield)
	case All:
		ix.all(yield)
	}
	return nil
}

// all yields every symbol in source order. With sorted, derived sizes it
// walks alias groups, deriving each group's size once from the address
// after it.
func (ix *Index) all(yield func(Symbol) bool) {
	n := ix.n
	if ix.sizes != nil || ix.byAddr != nil || ix.skipped != nil {
		for i := range n {
			if !yield(ix.Symbol(i)) {
				return
			}
		}
		return
	}
	rk := 0 // the first range that may hold the next address
	for i := 0; i < n; {
		a := ix.addr(i)
		j := i + 1
		var b uint64
		for j < n {
			if b = ix.addr(j); b != a {
				break
			}
			j++
		}
		var size uint64
		switch {
		case j < n:
			size = b - a
		case ix.derivedEnd > a:
			size = ix.derivedEnd - a
		}
		if ix.ranges != nil {
			for rk < len(ix.ranges) && (ix.ranges[rk].End < a || ix.ranges[rk].End == a && !ix.ranges[rk].EndIncluded) {
				rk++
			}
			if rk < len(ix.ranges) && ix.ranges[rk].Contains(a) {
				r := ix.ranges[rk]
				if j == n || b > r.End && !r.ToNextSymbol {
					size = r.End - a
				}
			}
		}
		for ; i < j; i++ {
			if !yield(ix.symbol(i, size, true)) {
				return
			}
		}
	}
}

// Lookup returns the best symbol containing addr.
func (ix *Index) Lookup(addr uint64) (Symbol, bool) {
	var s Symbol
	var ok bool
	ix.findAddr(addr, func(sym Symbol) bool { s, ok = sym, true; return false })
	return s, ok
}

// findAddr yields the symbols containing a. With derived sizes that is the
// alias group of the highest address ≤ a, in source order (the kernel
// reports the first of them). With stored sizes it is every symbol whose
// [addr, addr+size) holds a, the closest start first and, among equal
// starts, source order; a symbol of size 0 holds only its own address.
func (ix *Index) findAddr(a uint64, yield func(Symbol) bool) {
	if ix.ranges != nil {
		ix.findExtent(a, yield)
		return
	}
	p := ix.upper(a) // first position above a
	if p == 0 {
		return
	}
	if ix.sizes == nil {
		start := ix.addrAt(p - 1)
		var end uint64
		switch {
		case p < ix.n:
			end = ix.addrAt(p)
		case ix.derivedEnd > start:
			end = ix.derivedEnd
		default:
			end = start + 1 // unknown size: only the address itself
		}
		if a >= end {
			return
		}
		g := p - 1
		for g > 0 && ix.addrAt(g-1) == start {
			g--
		}
		var size uint64
		if end != start+1 || p < ix.n || ix.derivedEnd > start {
			size = end - start
		}
		for q := g; q < p; q++ {
			if !yield(ix.symbol(ix.sorted(q), size, true)) {
				return
			}
		}
		return
	}
	// Stored sizes: walk down while some earlier symbol may still reach a.
	var buf [16]int
	hits := buf[:0]
	for q := p - 1; q >= 0 && ix.maxLast[q] >= a; q-- {
		i := ix.sorted(q)
		if a-ix.addrs[i] < max(ix.sizes[i], 1) {
			hits = append(hits, i)
		}
	}
	slices.SortFunc(hits, func(x, y int) int {
		if c := cmp.Compare(ix.addrs[y], ix.addrs[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	for _, i := range hits {
		if !yield(ix.symbol(i, ix.sizes[i], false)) {
			return
		}
	}
}

// nameIndex builds the name index on first use: one pass hashes every
// name, a counting sort by bucket (stable, so equal names stay in source
// order) places them.
func (ix *Index) nameIndex() *nameIndex {
	ix.nameOnce.Do(func() {
		t := &ix.byName
		t.seed = maphash.MakeSeed()
		n := ix.n
		t.idxBits = uint(max(bits.Len32(uint32(max(n, 1)-1)), 1))
		// The largest power of two at most n/2 buckets (one for tiny
		// indexes): 2–4 entries per bucket.
		t.k = uint(max(bits.Len(uint(n/2)), 1) - 1)
		keys := make([]uint32, n) // bucket<<tagBits | tag
		t.start = make([]uint32, 1<<t.k+1)
		for i := range n {
			keys[i] = t.key(maphash.Bytes(t.seed, ix.NameBytes(i)))
			t.start[keys[i]>>t.tagBits()+1]++
		}
		for b := 1; b < len(t.start); b++ {
			t.start[b] += t.start[b-1]
		}
		t.entries = make([]uint32, n)
		next := slices.Clone(t.start[:len(t.start)-1])
		tagMask := uint32(1)<<t.tagBits() - 1
		for i, key := range keys {
			b := key >> t.tagBits()
			t.entries[next[b]] = (key&tagMask)<<t.idxBits | uint32(i)
			next[b]++
		}
	})
	return &ix.byName
}

// tagBits is how many bits of an entry are left above the index.
func (t *nameIndex) tagBits() uint { return 32 - t.idxBits }

// key is bucket<<tagBits | tag: the top k+tagBits bits of hash h.
func (t *nameIndex) key(h uint64) uint32 {
	return uint32(h >> (64 - t.k - t.tagBits()))
}

func (ix *Index) findName(name string, yield func(Symbol) bool) {
	t := ix.nameIndex()
	if ix.n == 0 {
		return
	}
	key := t.key(maphash.String(t.seed, name))
	tb := t.tagBits()
	b := key >> tb
	tag := key & (1<<tb - 1)
	idxMask := uint32(1)<<t.idxBits - 1
	for _, e := range t.entries[t.start[b]:t.start[b+1]] {
		if e>>t.idxBits != tag {
			continue
		}
		i := int(e & idxMask)
		if string(ix.NameBytes(i)) == name && !yield(ix.Symbol(i)) {
			return
		}
	}
}

// MemoryBytes returns the bytes the index's arrays occupy (excluding the
// name index while it has not been built).
func (ix *Index) MemoryBytes() int {
	return 8*cap(ix.addrs) + 4*cap(ix.addrLo) + 16*cap(ix.hiRuns) + 4*cap(ix.nameOff) + cap(ix.names) + 8*cap(ix.sizes) +
		4*cap(ix.byAddr) + 8*cap(ix.maxLast) + 4*cap(ix.radix) + 8*cap(ix.skipped) + 24*cap(ix.ranges) +
		4*cap(ix.byName.start) + 4*cap(ix.byName.entries)
}

// sortByAddr returns the source indexes ordered by address, equal addresses
// in source order. It is an LSD radix sort of the identity permutation on
// addr-min, one pass per byte that varies (three for a typical module; a
// module with an absolute per-CPU symbol needs more), so it is linear and
// stable whatever the span.
func sortByAddr(addrs []uint64) []uint32 {
	n := len(addrs)
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	if n < 2 {
		return perm
	}
	lo := slices.Min(addrs)
	var x uint64 // the bits that vary
	for _, a := range addrs {
		x |= a - lo
	}
	tmp := make([]uint32, n)
	src, dst := perm, tmp
	for shift := 0; shift < 64 && x>>shift != 0; shift += 8 {
		if byte(x>>shift) == 0 {
			continue
		}
		var count [256]int
		for _, i := range src {
			count[byte((addrs[i]-lo)>>shift)]++
		}
		sum := 0
		for k, c := range count {
			count[k] = sum
			sum += c
		}
		for _, i := range src {
			b := byte((addrs[i] - lo) >> shift)
			dst[count[b]] = i
			count[b]++
		}
		src, dst = dst, src
	}
	return src
}
