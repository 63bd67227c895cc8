package kallsyms

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// FinderName is the name Load's finders answer to in a symfinder.Chain.
const FinderName = "kallsyms"

// Result is what Load found: where the tables are and a finder over them.
type Result struct {
	Layout Layout
	// Index holds every symbol in the kernel's order; nil with
	// Options.Lazy.
	Index *symfinder.Index
	// Lazy decodes on demand; nil without Options.Lazy.
	Lazy *Lazy
}

// Finder returns the Index or the Lazy finder, whichever Load built.
func (r *Result) Finder() symfinder.Finder {
	if r.Lazy != nil {
		return r.Lazy
	}
	return r.Index
}

// Describe says how the tables were found and encoded (Layout.Describe).
func (r *Result) Describe() string { return r.Layout.Describe() }

// Load locates the kallsyms tables in kernel virtual memory kmem, validates
// them and returns their symbols, in the kernel's own order (the order of
// the vmlinux part of /proc/kallsyms) with the kernel's type letters and
// sizes derived from the next higher address.
//
// The tables are taken from Options.Tables, else from VMCOREINFO's
// SYMBOL(kallsyms_*) lines (v6.0+), else found by scanning the kernel image
// (see Options.ImageStart). Errors wrap ErrMissingInfo (and
// vmcoreinfo.ErrMissingInfo) when nothing says where to look, ErrNotFound
// when a scan finds nothing, ErrCorrupt (a *FormatError naming the check
// and address) when tables do not validate, and *memory.FaultError when
// memory they need is not in the dump.
func Load(kmem memory.Reader, info *vmcoreinfo.Info, opt Options) (*Result, error) {
	t, err := open(kmem, info, opt)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	if opt.Lazy {
		res.Lazy = newLazy(t, info)
	} else {
		ix, err := t.expandAll(info)
		if err != nil {
			return nil, err
		}
		res.Index = ix
	}
	res.Layout = t.lay
	return res, nil
}

// open locates the tables and chooses the address encoding.
func open(kmem memory.Reader, info *vmcoreinfo.Info, opt Options) (*tables, error) {
	if err := checkKnown(opt.Target); err != nil {
		return nil, fmt.Errorf("kallsyms: %w", err)
	}
	c := newConfig(info, opt)
	var l *located
	var err error
	a := opt.Tables
	switch {
	case a.Names != 0 && a.TokenTable != 0 && a.TokenIndex != 0:
		l, err = fromAddrs(kmem, c, a, SourceOptions)
	case hasVmcoreinfoTables(info):
		for _, s := range []struct {
			p    *uint64
			name string
		}{
			{&a.Names, "kallsyms_names"}, {&a.TokenTable, "kallsyms_token_table"},
			{&a.TokenIndex, "kallsyms_token_index"}, {&a.NumSyms, "kallsyms_num_syms"},
			{&a.Offsets, "kallsyms_offsets"}, {&a.RelativeBase, "kallsyms_relative_base"},
			{&a.Addresses, "kallsyms_addresses"},
		} {
			if *s.p == 0 {
				*s.p, _ = info.Symbol(s.name)
			}
		}
		l, err = fromAddrs(kmem, c, a, SourceVMCOREINFO)
	case opt.NoScan:
		return nil, fmt.Errorf("%w: SYMBOL(kallsyms_names), SYMBOL(kallsyms_token_table) or SYMBOL(kallsyms_token_index), and scanning is off", ErrMissingInfo)
	default:
		l, err = scan(kmem, c, opt)
	}
	if err != nil {
		return nil, err
	}
	if !l.chosen {
		if err := choose(l, info); err != nil {
			return nil, err
		}
	}
	return l.t, nil
}

func hasVmcoreinfoTables(info *vmcoreinfo.Info) bool {
	for _, s := range []string{"kallsyms_names", "kallsyms_token_table", "kallsyms_token_index"} {
		if _, ok := info.Symbol(s); !ok {
			return false
		}
	}
	return true
}

// pointerValued are VMCOREINFO SYMBOL() entries whose value is what a
// pointer holds, not the variable's address (docs/formats.md §1.6).
var pointerValued = map[string]bool{"mem_section": true, "vmemmap": true}

// anchors returns VMCOREINFO's SYMBOL() entries that should equal the
// address of the kallsyms symbol of the same name, _stext first.
func anchors(info *vmcoreinfo.Info) []anchor {
	var out []anchor
	if v, ok := info.Symbol("_stext"); ok {
		out = append(out, anchor{"_stext", v})
	}
	if info == nil {
		return out
	}
	for _, l := range info.Lines() {
		name, ok := strings.CutPrefix(l.Key, "SYMBOL(")
		if !ok || !strings.HasSuffix(name, ")") {
			continue
		}
		name = strings.TrimSuffix(name, ")")
		if name == "_stext" || pointerValued[name] {
			continue
		}
		if v, ok := info.Symbol(name); ok {
			out = append(out, anchor{name, v})
		}
	}
	return out
}

type anchor struct {
	name string
	addr uint64
}

// hasAt reports whether a symbol called name sits at addr, assuming the
// decoded addresses are sorted (a wrong encoding just fails the test).
func (t *tables) hasAt(name string, addr uint64) (bool, error) {
	var buf [maxExpanded]byte
	const maxAliases = 4096 // an alias group larger than this is not a real kernel
	for j, k := t.lowerBound(addr), 0; j < t.n && k < maxAliases && t.addrAt(j) == addr; j, k = j+1, k+1 {
		e, err := t.expandAt(buf[:0], j)
		if err != nil {
			return false, err
		}
		if len(e) > 0 && string(e[1:]) == name {
			return true, nil
		}
	}
	return false, nil
}

// choose picks the address table and encoding whose decoded _stext equals
// VMCOREINFO's. When several do, the one matching most other VMCOREINFO
// symbols wins; a tie is an error. Without any anchor, exactly one
// candidate must decode to non-decreasing addresses.
func choose(l *located, info *vmcoreinfo.Info) error {
	t := l.t
	anc := anchors(info)
	t.mask = ^uint64(0)
	if t.lay.PtrSize == 4 {
		t.mask = 0xffffffff
	}
	type pick struct {
		c     addrCand
		enc   Encoding
		raw   *addrTable
		base  uint64
		score int
	}
	var picks []pick
	var errs []error
	for _, c := range l.cands {
		width := uint64(4)
		if c.encs[0] == Absolute {
			width = uint64(t.lay.PtrSize)
		}
		raw, err := newAddrTable(t.r, c.table, width*uint64(t.n))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var base uint64
		if c.relBase != 0 {
			if base, err = t.lay.ReadPointer(t.r, c.relBase); err != nil {
				errs = append(errs, fmt.Errorf("kallsyms: relative_base at %#x: %w", c.relBase, err))
				continue
			}
		}
		for _, enc := range c.encs {
			t.enc, t.addr, t.base, t.tableVA = enc, raw, base, c.table
			score := 0
			if len(anc) == 0 {
				sorted := t.sorted()
				if err := raw.readErr(); err != nil {
					errs = append(errs, err)
					break
				}
				if !sorted {
					errs = append(errs, corrupt(c.table, 0, "%s does not decode to sorted addresses", enc))
					continue
				}
			} else {
				ok, err := t.hasAt(anc[0].name, anc[0].addr)
				if err != nil {
					return err
				}
				if ok && !t.aboveBase() {
					errs = append(errs, corrupt(c.table, t.addrAt(0), "%s: the first offset at %#x wraps below relative_base %#x", enc, c.table, base))
					continue
				}
				if err := raw.readErr(); err != nil {
					errs = append(errs, err)
					break
				}
				if !ok {
					errs = append(errs, corrupt(c.table, anc[0].addr, "%s at %#x does not put %s at VMCOREINFO's address", enc, c.table, anc[0].name))
					continue
				}
				score = 1
			}
			picks = append(picks, pick{c, enc, raw, base, score})
		}
	}
	if t.lay.PtrSize == 4 {
		// On 32-bit kernels absolute addresses and v7.0's 32-bit offsets
		// are the same bytes; keep one reading of a table.
		picks = slices.DeleteFunc(picks, func(p pick) bool {
			return p.enc == Absolute && slices.ContainsFunc(picks, func(q pick) bool { return q.enc == Offsets32 && q.c.table == p.c.table })
		})
	}
	if len(picks) > 1 {
		// Break the tie with the other anchors.
		best, tie := -1, false
		for i := range picks {
			p := &picks[i]
			t.enc, t.addr, t.base, t.tableVA = p.enc, p.raw, p.base, p.c.table
			if !t.sorted() || p.raw.readErr() != nil {
				continue
			}
			for _, a := range anc[min(1, len(anc)):] {
				if ok, _ := t.hasAt(a.name, a.addr); ok {
					p.score++
				}
			}
			switch {
			case best < 0 || p.score > picks[best].score:
				best, tie = i, false
			case p.score == picks[best].score:
				tie = true
			}
		}
		if best < 0 || tie {
			return corrupt(t.lay.Names.Addr, uint64(len(picks)), "%d address encodings validate equally; cannot choose", len(picks))
		}
		picks = picks[best : best+1]
	}
	if len(picks) == 0 {
		return candidates(nil, len(errs), errs, "no address table validates")
	}
	p := picks[0]
	t.enc, t.addr, t.base, t.tableVA = p.enc, p.raw, p.base, p.c.table
	width := uint64(4)
	if p.enc == Absolute {
		width = uint64(t.lay.PtrSize)
	}
	t.lay.Encoding = p.enc
	t.lay.Addresses = Region{p.c.table, width * uint64(t.n)}
	if p.c.relBase != 0 && (p.enc == BaseRelative || p.enc == AbsolutePercpu) {
		t.lay.RelativeBaseAt = Region{p.c.relBase, uint64(t.lay.PtrSize)}
		t.lay.RelativeBase = p.base
	}
	t.lay.Order = Order(p.c.order)
	seqs := l.seqs
	if p.c.seqs != 0 {
		seqs = p.c.seqs
	}
	if seqs != 0 {
		t.lay.SeqsOfNames = Region{seqs, 3 * uint64(t.n)}
	}
	return nil
}

// aboveBase reports whether a base-relative table's first address is not
// below relative_base, which scripts/kallsyms sets to the lowest address:
// an offset whose sum wraps the address space (a damaged entry, on a
// kernel such as riscv64's whose base is within 4 GiB of the top) would
// otherwise decode to small addresses that still sort below the rest.
// The other encodings have no such bound and always pass.
func (t *tables) aboveBase() bool {
	return t.enc != BaseRelative || t.n == 0 || t.addrAt(0) >= t.base
}

// sorted reports whether the decoded addresses never decrease (and, base
// relative, start at relative_base or above: aboveBase).
func (t *tables) sorted() bool {
	if !t.aboveBase() {
		return false
	}
	prev := uint64(0)
	for i := range t.n {
		a := t.addrAt(i)
		if a < prev {
			return false
		}
		prev = a
	}
	return true
}

// readSeqs reads seqs_of_names and checks it is a permutation. It reads
// through a small buffer, decoding as it goes.
func (t *tables) readSeqs() ([]uint32, error) {
	r := t.lay.SeqsOfNames
	if r.Addr+3*uint64(t.n) < r.Addr {
		return nil, corrupt(r.Addr, uint64(t.n), "kallsyms_seqs_of_names of %d entries wraps the address space", t.n)
	}
	perm := make([]uint32, t.n)
	seen := make([]uint64, (t.n+63)/64)
	const step = 4096
	buf := make([]byte, 3*min(step, t.n))
	for j0 := 0; j0 < t.n; j0 += step {
		m := min(step, t.n-j0)
		raw := buf[:3*m]
		addr := r.Addr + 3*uint64(j0)
		if err := memory.ReadFull(t.r, raw, addr); err != nil {
			return nil, fmt.Errorf("kallsyms: kallsyms_seqs_of_names at %#x: %w", addr, err)
		}
		out := perm[j0 : j0+m]
		for j := range out {
			v := uint32(raw[3*j])<<16 | uint32(raw[3*j+1])<<8 | uint32(raw[3*j+2])
			if int(v) >= t.n || seen[v/64]&(1<<(v%64)) != 0 {
				return nil, corrupt(addr+uint64(3*j), uint64(v), "kallsyms_seqs_of_names[%d] is not part of a permutation", j0+j)
			}
			seen[v/64] |= 1 << (v % 64)
			out[j] = v
		}
	}
	return perm, nil
}

// expandAll decodes every symbol into an Index, checking every marker,
// the sort order, and VMCOREINFO's symbols on the way.
//
// It reads the address table and the names (each buffer growing only as
// reads succeed, so counts are shown real before anything is sized by
// them), sizes the expanded names exactly (see expandedSize), and expands
// them into that one buffer.
func (t *tables) expandAll(info *vmcoreinfo.Info) (*symfinder.Index, error) {
	w := t.addrWidth()
	raw, err := readChunked(t.r, t.tableVA, uint64(w*t.n), "address table")
	if err != nil {
		return nil, err
	}
	names := t.whole
	if names == nil {
		if names, err = readChunked(t.r, t.lay.Names.Addr, uint64(t.namesLen), "kallsyms_names"); err != nil {
			return nil, err
		}
	}
	total, err := t.expandedSize(names)
	if err != nil {
		return nil, err
	}
	// The fast path of expand may store up to room bytes past the last
	// name; the buffer has that much more capacity than the names need.
	dst := make([]byte, 0, total+max(t.tok.room, 16))
	nameOff := make([]uint32, t.n+1)
	f := newFilter(info)
	off := 0
	for i := range t.n {
		codes, next, _ := entry(names, off, t.big) // checked by expandedSize
		o := len(dst)
		dst = t.tok.expand(dst, names[codes:next])
		if l := len(dst) - o; l == 0 || l > maxExpanded {
			return nil, corrupt(t.lay.Names.Addr+uint64(off), uint64(l), "names entry %d expands to %d bytes", i, l)
		}
		nameOff[i+1] = uint32(len(dst))
		if name := dst[o+1:]; f.maybe(name) {
			f.check(name, decodeAddr(t.enc, raw[w*i:], i, t.bo, t.lay.PtrSize, t.base, t.tableVA)&t.mask)
		}
		off = next
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	prev := uint64(0)
	// seqs_of_names is not read: the index hashes names for lookups,
	// which is cheaper than checking the kernel's order would be.
	return symfinder.NewSorted(FinderName, "", dst, nameOff, func(first int, out []uint64) error {
		decodeWindow(out, t.enc, raw[w*first:], first, t.bo, t.lay.PtrSize, t.base, t.tableVA)
		for j, a := range out {
			a &= t.mask
			if a < prev {
				return corrupt(t.lay.Addresses.Addr, uint64(first+j), "symbol %d is below the one before it", first+j)
			}
			out[j], prev = a, a
		}
		return nil
	}, f.end(), f.ranges(info))
}

// expandedSize checks every names entry and marker and returns how many
// bytes the names expand to (type letters included): the lengths of the
// tokens of every byte of names, less those of the entries' length
// prefixes. Summing over the whole table in one flat loop, and hopping
// from prefix to prefix, is a third of the cost of summing entry by
// entry, whose inner loop mispredicts its exit once per symbol.
func (t *tables) expandedSize(names []byte) (int, error) {
	// Four sums, so that the additions do not wait on one another.
	ln := &t.tok.n
	var s0, s1, s2, s3 uint64
	rest := names
	for ; len(rest) >= 4; rest = rest[4:] {
		s0 += uint64(ln[rest[0]])
		s1 += uint64(ln[rest[1]])
		s2 += uint64(ln[rest[2]])
		s3 += uint64(ln[rest[3]])
	}
	for _, b := range rest {
		s0 += uint64(ln[b])
	}
	total := s0 + s1 + s2 + s3
	off := 0
	for i := range t.n {
		if i&255 == 0 {
			if k := i >> 8; uint32(off) != t.markers[k] {
				return 0, corrupt(t.lay.Markers.Addr+uint64(k*t.lay.MarkerSize), uint64(t.markers[k]), "kallsyms_markers[%d] is not the offset of names entry %d (%#x)", k, i, off)
			}
		}
		codes, next, ok := entry(names, off, t.big)
		if !ok {
			return 0, corrupt(t.lay.Names.Addr+uint64(off), uint64(i), "names entry %d is malformed or crosses the next block's kallsyms_markers", i)
		}
		for _, b := range names[off:codes] {
			total -= uint64(ln[b])
		}
		off = next
	}
	if off != t.namesLen {
		return 0, corrupt(t.lay.Names.Addr+uint64(off), uint64(off), "names end before kallsyms_markers")
	}
	if total > math.MaxUint32 {
		return 0, corrupt(t.lay.Names.Addr, total, "names expand to %d bytes, past 4 GiB", total)
	}
	return int(total), nil
}

// filter watches the expansion for the names VMCOREINFO gives addresses of
// and for the section ends sizes are derived from, at about a nanosecond a
// symbol: a mask by first byte and length decides whether to look closer.
type filter struct {
	// mask and lastMask are Bloom-like prefilters on (first byte, length)
	// and (last byte, length): almost every kernel name fails one of them,
	// so the map is consulted for a handful of names only.
	mask     [256]uint64
	lastMask [256]uint64
	want     map[string]uint64 // VMCOREINFO address; 0 for the ends
	seen     map[string]bool   // seen at the VMCOREINFO address
	other    map[string]uint64 // seen elsewhere
	ends     map[string]uint64
}

var endNames = []string{"_end", "_etext", "_einittext"}

// sectionNames are the symbols the filter records besides the anchors:
// the ends, and what symfinder.KernelRanges asks for.
var sectionNames = []string{"_end", "_etext", "_einittext", "_stext", "_sinittext", "__per_cpu_start", "__per_cpu_end"}

func newFilter(info *vmcoreinfo.Info) *filter {
	f := &filter{want: map[string]uint64{}, seen: map[string]bool{}, other: map[string]uint64{}, ends: map[string]uint64{}}
	add := func(name string, v uint64) {
		if name == "" {
			return
		}
		f.mask[name[0]] |= 1 << (len(name) & 63)
		f.lastMask[name[len(name)-1]] |= 1 << (len(name) & 63)
		if _, ok := f.want[name]; !ok {
			f.want[name] = v
		}
	}
	for _, n := range sectionNames {
		add(n, 0)
	}
	for _, a := range anchors(info) {
		f.want[a.name] = a.addr
		add(a.name, a.addr)
	}
	return f
}

// maybe reports whether name may be one the filter watches; almost every
// name is rejected by two table lookups.
func (f *filter) maybe(name []byte) bool {
	return len(name) > 0 && f.mask[name[0]]>>(len(name)&63)&1 != 0 && f.lastMask[name[len(name)-1]]>>(len(name)&63)&1 != 0
}

// check records name at a.
func (f *filter) check(name []byte, a uint64) {
	if !f.maybe(name) {
		return
	}
	v, ok := f.want[string(name)]
	if !ok {
		return
	}
	for _, n := range sectionNames {
		if bytes.Equal(name, []byte(n)) {
			if _, dup := f.ends[n]; !dup {
				f.ends[n] = a
			}
		}
	}
	if v == 0 {
		return
	}
	if a == v {
		f.seen[string(name)] = true
	} else {
		f.other[string(name)] = a
	}
}

// err reports a VMCOREINFO symbol found only at another address.
func (f *filter) err() error {
	for name, a := range f.other {
		if !f.seen[name] {
			return corrupt(a, f.want[name], "symbol %s decodes to %#x, VMCOREINFO says %#x", name, a, f.want[name])
		}
	}
	return nil
}

// end is where the highest symbol ends, as the kernel derives it: _end
// with KALLSYMS_ALL, else the end of (init) text.
func (f *filter) end() uint64 {
	var e uint64
	for _, n := range endNames {
		e = max(e, f.ends[n])
	}
	return e
}

// ranges are where the kernel answers lookups by address (see
// symfinder.KernelRanges), from the section symbols the filter saw.
func (f *filter) ranges(info *vmcoreinfo.Info) []symfinder.Range {
	return symfinder.KernelRanges(func(n string) (uint64, bool) { v, ok := f.ends[n]; return v, ok }, inclusiveEnds(info))
}

// inclusiveEnds reports a kernel before 5.16, whose is_ksym_addr compared
// addr <= _end (_etext, _einittext); from 5.16 (the sections.h helpers
// __is_kernel and __is_kernel_text) the ends are excluded. An unknown
// release is taken as a current kernel.
func inclusiveEnds(info *vmcoreinfo.Info) bool {
	major, minor := release(info)
	return major != 0 && (major < 5 || major == 5 && minor < 16)
}
