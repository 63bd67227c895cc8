package kallsyms

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/internal/nozero"
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
	c := newConfig(info, opt)
	var l *located
	var err error
	a := opt.Tables
	switch {
	case a.Names != 0 && a.TokenTable != 0 && a.TokenIndex != 0:
		l, err = fromAddrs(kmem, c, a, "options")
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
		l, err = fromAddrs(kmem, c, a, "vmcoreinfo")
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
			if base, err = memory.Pointer(t.r, t.bo, t.lay.PtrSize, c.relBase); err != nil {
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
		return fmt.Errorf("kallsyms: no address table validates: %w", errors.Join(errs...))
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
	t.lay.Order = p.c.order
	seqs := l.seqs
	if p.c.seqs != 0 {
		seqs = p.c.seqs
	}
	if seqs != 0 {
		t.lay.SeqsOfNames = Region{seqs, 3 * uint64(t.n)}
	}
	return nil
}

// sorted reports whether the decoded addresses never decrease.
func (t *tables) sorted() bool {
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

// Whole expansion runs on up to maxWorkers goroutines (GOMAXPROCS
// permitting), each over a run of at least minPartBlocks 256-entry blocks:
// the token expansion is three quarters of the work and needs nothing
// from its neighbours but where its run starts in names, which the
// markers give.
const maxWorkers = 4

// minPartBlocks is the fewest blocks worth a worker of their own; tests
// lower it (and set forceParts) to split small tables.
var minPartBlocks = 64

// forceParts, when positive, is the number of parts split makes
// regardless of GOMAXPROCS, for tests.
var forceParts = 0

// regionMargin is how much larger than the sampled ratio predicts a part's
// region is; tests shrink it, part by part, to make parts outgrow their
// regions.
var regionMargin = []float64{1.1}

// part is one worker's share of the expansion: symbols [i0, i1) (blocks
// [k0, k1)) from names[m0:m1], written to out.
type part struct {
	k0, k1, i0, i1, m0, m1 int
	at                     int     // where its region starts in the shared buffer
	out                    []byte  // expanded names; its region unless it outgrew it
	own                    bool    // out is the worker's own buffer
	f                      *filter // shared; workers only call maybe
	hits                   []int   // symbols whose names f may watch
	err                    error
}

// expandAll decodes every symbol into an Index, checking every marker,
// the sort order, and VMCOREINFO's symbols on the way.
//
// It reads the address table, splits the blocks into parts of about
// equal names bytes (one per worker, up to GOMAXPROCS and maxWorkers), and
// sizes a region of one buffer for each from a sample of the expansion
// ratio. It then reads each part's names (growing the buffer only as
// reads succeed) and hands them to a worker before reading the next; the
// last part runs on the calling goroutine, while another compacts the
// addresses. The memory reader is only used by the calling goroutine.
// Workers only note which names the VMCOREINFO filter may watch; the
// calling goroutine checks them. A part writes its names into its region
// and the absolute offsets of its symbols into the shared offsets; the
// regions are then closed up. A part that outgrows its region continues
// in a buffer of its own, and then every part is gathered into a new
// buffer.
func (t *tables) expandAll(info *vmcoreinfo.Info) (*symfinder.Index, error) {
	// The address table is read first (its buffer growing only as reads
	// succeed): it shows the symbol count is real before the offsets are
	// allocated for it.
	w := t.addrWidth()
	raw, err := readChunked(t.r, t.tableVA, uint64(w*t.n), "address table")
	if err != nil {
		return nil, err
	}
	names := t.whole
	if names == nil && t.namesLen > maxUnreadNames {
		// Too large to allocate for before reading: read it all first.
		if names, err = readChunked(t.r, t.lay.Names.Addr, uint64(t.namesLen), "kallsyms_names"); err != nil {
			return nil, err
		}
	}
	parts := t.split()
	ratio, err := t.sampleRatio(names)
	if err != nil {
		return nil, err
	}
	ratio = min(ratio, maxRegionRatio)
	total := 0
	for j := range parts {
		p := &parts[j]
		p.at = total
		total += int(float64(p.m1-p.m0)*ratio*regionMargin[j%len(regionMargin)]) + 4096
	}
	// Neither buffer is zeroed: the workers write every byte that is kept,
	// taking the page faults of their own regions in parallel.
	buf := nozero.Bytes(total)[:total]
	nameOff := nozero.Uint32s(t.n + 1)[:t.n+1]
	nameOff[0] = 0
	f := newFilter(info)
	var wg, cwg sync.WaitGroup
	defer cwg.Wait() // no goroutine outlives Load, whichever way it returns
	var readErr error
	var sorted *symfinder.SortedAddrs
	var sortErr error
	for j := range parts {
		p := &parts[j]
		p.f = f
		end := total
		if j+1 < len(parts) {
			end = parts[j+1].at
		}
		region := buf[p.at:p.at:end]
		var src []byte
		if names != nil {
			src = names[p.m0:p.m1]
		} else if src, readErr = readChunked(t.r, t.lay.Names.Addr+uint64(p.m0), uint64(p.m1-p.m0), "kallsyms_names"); readErr != nil {
			break
		}
		if j == len(parts)-1 {
			// The addresses are decoded and compacted on a goroutine of
			// their own while the names expand and are closed up.
			cwg.Go(func() {
				prev := uint64(0)
				sorted, sortErr = symfinder.CompactSorted(t.n, func(first int, out []uint64) error {
					decodeWindow(out, t.enc, raw[w*first:], first, t.bo, t.lay.PtrSize, t.base, t.tableVA)
					for j, a := range out {
						a &= t.mask
						if a < prev {
							return corrupt(t.lay.Addresses.Addr, uint64(first+j), "symbol %d is below the one before it", first+j)
						}
						out[j], prev = a, a
					}
					return nil
				})
			})
			t.expandPart(p, src, region, nameOff)
			break
		}
		wg.Go(func() { t.expandPart(p, src, region, nameOff) })
	}
	wg.Wait()
	if readErr != nil {
		return nil, readErr
	}
	for j := range parts {
		if parts[j].err != nil {
			return nil, parts[j].err
		}
	}
	total = 0
	for _, p := range parts {
		total += len(p.out)
	}
	if uint64(total) > math.MaxUint32 {
		return nil, corrupt(t.lay.Names.Addr, uint64(total), "names expand to %d bytes", total)
	}
	buf = closeUp(buf, parts, nameOff)
	cwg.Wait()
	if sortErr != nil {
		return nil, sortErr
	}
	for _, p := range parts {
		for _, i := range p.hits {
			f.check(buf[nameOff[i]+1:nameOff[i+1]], decodeAddr(t.enc, raw[w*i:], i, t.bo, t.lay.PtrSize, t.base, t.tableVA)&t.mask)
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	// seqs_of_names is not read: the index hashes names for lookups,
	// which is cheaper than checking the kernel's order would be.
	return symfinder.NewSortedFrom(FinderName, "", sorted, buf[:nameOff[t.n]], nameOff, f.end())
}

// closeUp moves each part down to where the one before it ended (a
// memmove within buf) and its offsets with it, and returns the buffer
// holding all names, which is a new one when a part outgrew its region:
// moving it into place could overwrite a later part's region before that
// moves. The parts' total is below 4 GiB.
func closeUp(buf []byte, parts []part, nameOff []uint32) []byte {
	pos := 0
	for _, p := range parts {
		pos += len(p.out)
	}
	if slices.ContainsFunc(parts, func(p part) bool { return p.own }) {
		buf = make([]byte, pos)
	}
	pos = 0
	for _, p := range parts {
		copy(buf[pos:], p.out)
		shift := uint32(pos)
		if !p.own {
			shift -= uint32(p.at) // its offsets are absolute in the shared buffer
		}
		if shift != 0 {
			for i := p.i0 + 1; i <= p.i1; i++ {
				nameOff[i] += shift
			}
		}
		pos += len(p.out)
	}
	return buf[:pos]
}

// split divides the blocks into parts of about equal names bytes, one per
// worker. Every part but the last has whole blocks of 256 symbols.
func (t *tables) split() []part {
	nb := len(t.markers)
	np := min(runtime.GOMAXPROCS(0), maxWorkers)
	if forceParts > 0 {
		np = forceParts
	}
	np = max(1, min(np, nb/minPartBlocks))
	parts := make([]part, 0, np)
	k := 0
	for j := range np {
		k1 := nb
		if j < np-1 {
			goal := t.namesLen / np * (j + 1)
			k1 = k + 1
			for k1 < nb-(np-1-j) && int(t.markers[k1]) < goal {
				k1++
			}
		}
		p := part{k0: k, k1: k1, i0: 256 * k, i1: min(256*k1, t.n), m0: int(t.markers[k]), m1: t.namesLen}
		if k1 < nb {
			p.m1 = int(t.markers[k1])
		}
		parts = append(parts, p)
		k = k1
	}
	return parts
}

// sampleBlocks is how many blocks sampleRatio expands.
const sampleBlocks = 32

// maxRegionRatio caps the sampled ratio the regions are sized by: real
// kernels expand 1.4–1.9 times, and a hostile token table that expands
// more makes its parts grow buffers of their own as their output grows,
// instead of one allocation sized by the sample.
const maxRegionRatio = 3

// maxUnreadNames is the most names bytes expandAll allocates for before
// reading them (its regions, about twice that, are not touched until
// written): a 6.12 kernel has 2.3 MB. Larger tables are read first, so
// that an allocation sized by them follows proof that they are in the
// dump. Tests lower it.
var maxUnreadNames = 16 << 20

// sampleRatio estimates expanded bytes per names byte from a few blocks
// spread over the table (1.4–1.9 on real kernels). Malformed entries end
// a block's sample; the expansion proper reports them.
func (t *tables) sampleRatio(names []byte) (float64, error) {
	nb := len(t.markers)
	ns := min(sampleBlocks, nb)
	in, out := 0, 0
	var raw []byte
	scratch := make([]byte, 0, max(t.tok.room, 16)*maxCodes) // room for the fast path
	for s := range ns {
		k := s * nb / ns
		start, end := int(t.markers[k]), t.namesLen
		if k+1 < nb {
			end = int(t.markers[k+1])
		}
		var blk []byte
		if names != nil {
			blk = names[start:end]
		} else {
			raw = slices.Grow(raw[:0], end-start)[:end-start]
			addr := t.lay.Names.Addr + uint64(start)
			if err := memory.ReadFull(t.r, raw, addr); err != nil {
				return 0, fmt.Errorf("kallsyms: kallsyms_names at %#x: %w", addr, err)
			}
			blk = raw
		}
		off := 0
		for range min(256, t.n-256*k) {
			codes, next, ok := entry(blk, off, t.big)
			if !ok {
				break
			}
			scratch = t.tok.expand(scratch[:0], blk[codes:next])
			in += next - off
			out += len(scratch)
			off = next
		}
	}
	if in == 0 {
		return 2, nil
	}
	return max(1, float64(out)/float64(in)), nil
}

// expandPart expands part p from src (its names, starting at names offset
// p.m0) into dst (len 0, the part's region), writing each symbol's end to
// nameOff[i+1]: absolute in the shared buffer while in the region, and
// relative to its own buffer once it has outgrown it.
func (t *tables) expandPart(p *part, src, dst []byte, nameOff []uint32) {
	off := 0
	room := max(t.tok.room, 16)
	base := uint32(p.at)
	for i := p.i0; i < p.i1; i++ {
		if i&255 == 0 {
			k := i >> 8
			if uint32(p.m0+off) != t.markers[k] {
				p.err = corrupt(t.lay.Markers.Addr+uint64(k*t.lay.MarkerSize), uint64(t.markers[k]), "kallsyms_markers[%d] is not the offset of names entry %d (%#x)", k, i, p.m0+off)
				return
			}
		}
		codes, next, ok := entry(src, off, t.big)
		if !ok {
			p.err = corrupt(t.lay.Names.Addr+uint64(p.m0+off), uint64(i), "names entry %d is malformed or crosses the next block's kallsyms_markers", i)
			return
		}
		if need := room * (next - codes); cap(dst)-len(dst) < need {
			grown := make([]byte, len(dst), max(expandEstimate(p.m1-p.m0, off, len(dst)), len(dst)+need))
			copy(grown, dst)
			if !p.own {
				for j := p.i0 + 1; j <= i; j++ {
					nameOff[j] -= base
				}
				base, p.own = 0, true
			}
			dst = grown
		}
		o := len(dst)
		dst = t.tok.expand(dst, src[codes:next])
		if l := len(dst) - o; l == 0 || l > maxExpanded {
			p.err = corrupt(t.lay.Names.Addr+uint64(p.m0+off), uint64(l), "names entry %d expands to %d bytes", i, l)
			return
		}
		end := uint64(base) + uint64(len(dst))
		if end > math.MaxUint32 {
			p.err = corrupt(t.lay.Names.Addr+uint64(p.m0+off), end, "names expand past 4 GiB")
			return
		}
		nameOff[i+1] = uint32(end)
		if p.f.maybe(dst[o+1:]) {
			p.hits = append(p.hits, i)
		}
		off = next
	}
	if p.m0+off != p.m1 {
		if p.m1 == t.namesLen {
			p.err = corrupt(t.lay.Names.Addr+uint64(p.m0+off), uint64(p.m0+off), "names end before kallsyms_markers")
		} else {
			p.err = corrupt(t.lay.Markers.Addr+uint64(p.k1*t.lay.MarkerSize), uint64(p.m1), "kallsyms_markers[%d] is not the offset of names entry %d (%#x)", p.k1, p.i1, p.m0+off)
		}
		return
	}
	p.out = dst
}

// expandEstimate is how many bytes to reserve for expanded names when done
// of the total bytes of names have expanded to out bytes: the ratio so far
// applied to the rest, plus a margin.
func expandEstimate(total, done, out int) int {
	const slack = 64 << 10
	if done == 0 {
		return 2*total + slack
	}
	rest := total - done
	return out + int(float64(rest)*float64(out)/float64(done)*1.05) + slack
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
	for _, n := range endNames {
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
	for _, n := range endNames {
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
	for _, v := range f.ends {
		e = max(e, v)
	}
	return e
}
