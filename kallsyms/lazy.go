package kallsyms

import (
	"bytes"
	"slices"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Lazy is a Finder over kallsyms tables that decodes names on demand: opening
// it reads only the token table, the markers and the parts of the address
// table that validating it touches. A lookup by address binary-searches the
// addresses (16 KiB of the table is read on first use and kept) and decodes
// the names of the symbols it returns through the markers (a block of 256
// names is read and indexed on first use and kept). A lookup by name binary-searches
// kallsyms_seqs_of_names where the kernel has it, and otherwise expands
// every name once into an Index. Lookups by address answer only where the
// kernel does (see symfinder.KernelRanges), which needs the section
// symbols (_stext, _etext, _end, ...): found through seqs_of_names, or on
// kernels without it (before 6.2) by expanding every name on the first
// lookup by address too. Answers are identical to the Index Load
// builds without Options.Lazy, provided the tables validate (the lazy
// finder checks only the blocks it reads; an Index checks everything).
//
// Find returns an error when a block of names cannot be read or does not
// validate. A Lazy is safe for concurrent use.
type Lazy struct {
	t    *tables
	info *vmcoreinfo.Info

	seqsOnce sync.Once
	seqs     []uint32
	seqsErr  error

	endOnce sync.Once
	end     uint64
	ranges  []symfinder.Range
	endErr  error

	ixOnce sync.Once
	ix     *symfinder.Index
	ixErr  error
}

func newLazy(t *tables, info *vmcoreinfo.Info) *Lazy { return &Lazy{t: t, info: info} }

// Name implements symfinder.Finder.
func (z *Lazy) Name() string { return FinderName }

// Len returns the number of symbols.
func (z *Lazy) Len() int { return z.t.n }

// Layout returns where the tables are.
func (z *Lazy) Layout() Layout { return z.t.lay }

// Find implements symfinder.Finder.
func (z *Lazy) Find(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
	switch q.Kind {
	case symfinder.ByAddr:
		return z.findAddr(q.Addr, yield)
	case symfinder.ByName:
		return z.findName(q.Name, yield)
	case symfinder.All:
		return z.all(yield)
	}
	return nil
}

// addrErr is the first fault reading the address table: addresses decoded
// after it may be zeros, so nothing is yielded once it is set.
func (z *Lazy) addrErr() error { return z.t.addr.readErr() }

// index expands everything once, for name lookups without seqs_of_names.
func (z *Lazy) index() (*symfinder.Index, error) {
	z.ixOnce.Do(func() { z.ix, z.ixErr = z.t.expandAll(z.info) })
	return z.ix, z.ixErr
}

// derivedEnd finds _end, _etext and _einittext by name, as expandAll does,
// and the ranges in which the kernel answers lookups by address, through
// seqs_of_names. Without it (kernels before 6.2) the Lazy answers lookups
// by address and sizes from the expanded index instead (see sized).
func (z *Lazy) derivedEnd() (uint64, error) {
	z.endOnce.Do(func() {
		sect := map[string]uint64{}
		for _, n := range sectionNames {
			hits, err := z.lookupName(n)
			if err != nil {
				z.endErr = err
				return
			}
			if len(hits) > 0 {
				sect[n] = z.t.addrAt(hits[0])
			}
		}
		for _, n := range endNames {
			z.end = max(z.end, sect[n])
		}
		z.ranges = symfinder.KernelRanges(func(n string) (uint64, bool) { v, ok := sect[n]; return v, ok }, inclusiveEnds(z.info))
	})
	return z.end, z.endErr
}

func (z *Lazy) symbol(i int, size uint64, buf []byte) (symfinder.Symbol, error) {
	e, err := z.t.expandAt(buf[:0], i)
	if err != nil {
		return symfinder.Symbol{}, err
	}
	if len(e) == 0 {
		return symfinder.Symbol{}, corrupt(z.t.lay.Names.Addr, uint64(i), "names entry %d expands to nothing", i)
	}
	return symfinder.Symbol{Name: string(e[1:]), Addr: z.t.addrAt(i), Size: size, SizeDerived: true, Kind: symfinder.Kind(e[0])}, nil
}

// upper returns the first index whose address is above a.
func (z *Lazy) upper(a uint64) int {
	t := z.t
	lo, hi := 0, t.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.addrAt(m) <= a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// findAddr mirrors symfinder.Index for derived sizes: the alias group of
// the highest address <= a, if a lies before the next higher address.
func (z *Lazy) findAddr(a uint64, yield func(symfinder.Symbol) bool) error {
	t := z.t
	if t.lay.SeqsOfNames.Addr == 0 {
		// The section symbols that bound the extents can only be found
		// by name, which needs every name expanded.
		ix, err := z.index()
		if err != nil {
			return err
		}
		return ix.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: a}, yield)
	}
	de, err := z.derivedEnd()
	if err != nil {
		return err
	}
	r, in := symfinder.RangeOf(z.ranges, a, true)
	if z.ranges != nil && !in {
		return nil
	}
	p := z.upper(a)
	if p == 0 {
		return nil
	}
	start := t.addrAt(p - 1)
	var end, size uint64
	if p < t.n {
		end = t.addrAt(p)
		size = end - start
	} else if de > start {
		end, size = de, de-start
	} else {
		end = start + 1
	}
	if z.ranges != nil {
		if start < r.Start {
			return nil
		}
		if p == t.n || end > r.End && !r.ToNextSymbol {
			end, size = r.End, r.End-start
		}
		if r.EndIncluded {
			end++ // r.End itself is in
		}
	}
	g := p - 1
	for g > 0 && t.addrAt(g-1) == start {
		g--
	}
	if err := z.addrErr(); err != nil || a >= end {
		return err
	}
	var buf [maxExpanded + 16]byte
	for i := g; i < p; i++ {
		s, err := z.symbol(i, size, buf[:])
		if err != nil {
			return err
		}
		if !yield(s) {
			return nil
		}
	}
	return nil
}

// sizeAt derives the size of symbol i as symfinder.Index does.
func (z *Lazy) sizeAt(i int) (uint64, error) {
	t := z.t
	if t.lay.SeqsOfNames.Addr == 0 {
		ix, err := z.index()
		if err != nil {
			return 0, err
		}
		size, _ := ix.Size(i)
		return size, nil
	}
	de, err := z.derivedEnd()
	if err != nil {
		return 0, err
	}
	a := t.addrAt(i)
	r, in := symfinder.RangeOf(z.ranges, a, false)
	for j := i + 1; j < t.n; j++ {
		if b := t.addrAt(j); b > a {
			if in && b > r.End && !r.ToNextSymbol {
				return r.End - a, nil
			}
			return b - a, nil
		}
	}
	if in {
		return r.End - a, nil
	}
	if de <= a {
		return 0, nil
	}
	return de - a, nil
}

func (z *Lazy) all(yield func(symfinder.Symbol) bool) error {
	var buf [maxExpanded + 16]byte
	t := z.t
	for i := 0; i < t.n; {
		// One size per alias group.
		size, err := z.sizeAt(i)
		if err != nil {
			return err
		}
		a := t.addrAt(i)
		if err := z.addrErr(); err != nil {
			return err
		}
		for ; i < t.n && t.addrAt(i) == a; i++ {
			s, err := z.symbol(i, size, buf[:])
			if err != nil {
				return err
			}
			if !yield(s) {
				return nil
			}
		}
	}
	return nil
}

func (z *Lazy) findName(name string, yield func(symfinder.Symbol) bool) error {
	if z.t.lay.SeqsOfNames.Addr == 0 {
		ix, err := z.index()
		if err != nil {
			return err
		}
		return ix.Find(symfinder.Query{Kind: symfinder.ByName, Name: name}, yield)
	}
	hits, err := z.lookupName(name)
	if err != nil {
		return err
	}
	var buf [maxExpanded + 16]byte
	for _, i := range hits {
		size, err := z.sizeAt(i)
		if err == nil {
			err = z.addrErr()
		}
		if err != nil {
			return err
		}
		s, err := z.symbol(i, size, buf[:])
		if err != nil {
			return err
		}
		if !yield(s) {
			return nil
		}
	}
	return nil
}

// lookupName binary-searches seqs_of_names for name and returns the
// matching indexes in table order.
func (z *Lazy) lookupName(name string) ([]int, error) {
	z.seqsOnce.Do(func() { z.seqs, z.seqsErr = z.t.readSeqs() })
	if z.seqsErr != nil {
		return nil, z.seqsErr
	}
	var buf [maxExpanded + 16]byte
	var err error
	cmpAt := func(j int) int {
		if err != nil {
			return 0
		}
		var e []byte
		e, err = z.t.expandAt(buf[:0], int(z.seqs[j]))
		if len(e) == 0 {
			return -1
		}
		return bytes.Compare(e[1:], []byte(name))
	}
	lo, hi := 0, len(z.seqs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmpAt(m) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	var hits []int
	for j := lo; j < len(z.seqs) && cmpAt(j) == 0 && err == nil; j++ {
		hits = append(hits, int(z.seqs[j]))
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(hits)
	return hits, nil
}
