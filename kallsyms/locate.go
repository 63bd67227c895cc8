package kallsyms

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// config is what Load settles before locating anything.
type config struct {
	bo     binary.ByteOrder // nil: decide from token_index
	ptr    int
	page   uint64
	algns  []uint64 // label alignments to try, preferred first
	bigPre bool     // prefer two-byte name lengths (OSRELEASE >= 6.1)
	info   *vmcoreinfo.Info
}

func newConfig(info *vmcoreinfo.Info, opt Options) config {
	t := opt.Target
	c := config{bo: t.ByteOrder, ptr: t.PtrSize, page: uint64(t.PageSize), info: info}
	arch := ""
	if info != nil {
		arch = info.Arch()
	}
	if c.bo == nil && arch == "s390x" {
		c.bo = binary.BigEndian
	}
	if c.ptr != 4 && c.ptr != 8 {
		c.ptr = 4
		if arch != "" && arch != "arm" { // the others VMCOREINFO names are 64-bit
			c.ptr = 8
		} else if s, ok := info.Symbol("_stext"); ok && s > 0xffffffff {
			c.ptr = 8
		}
	}
	if c.page == 0 || c.page&(c.page-1) != 0 {
		c.page = 4096
		if ps, ok := info.PageSize(); ok && ps >= 512 && ps&(ps-1) == 0 {
			c.page = ps
		}
	}
	major, minor := release(info)
	// v7.0 aligns every label to 4; before, to the pointer size. Try the
	// version's rule first and the other one after.
	c.algns = []uint64{uint64(c.ptr)}
	if c.ptr == 8 {
		if major >= 7 {
			c.algns = []uint64{4, 8}
		} else {
			c.algns = []uint64{8, 4}
		}
	}
	c.bigPre = major > 6 || major == 6 && minor >= 1 || major == 0
	return c
}

// release parses OSRELEASE's "major.minor"; 0, 0 when unknown.
func release(info *vmcoreinfo.Info) (int, int) {
	if info == nil {
		return 0, 0
	}
	s := info.OSRelease()
	maj, rest, _ := strings.Cut(s, ".")
	min, _, _ := strings.Cut(rest, ".")
	for i, c := range min {
		if c < '0' || c > '9' {
			min = min[:i]
			break
		}
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return a, b
}

// addrCand is one place and set of encodings the address table may have.
type addrCand struct {
	encs    []Encoding
	table   uint64
	relBase uint64 // address of kallsyms_relative_base; 0 none
	seqs    uint64 // seqs_of_names this candidate implies (v6.4 order); 0 none
	order   string
}

// located is the result of finding the tables, before the address encoding
// is chosen.
type located struct {
	t     *tables
	algn  uint64
	seqs  uint64 // seqs_of_names implied by the markers position; 0 none
	order string // emission order implied by the markers position, if any
	cands []addrCand
	// chosen: the scan already chose the address encoding.
	chosen bool
}

// readTokens reads and validates token_index at ti and token_table at tt,
// deciding the byte order when bo is nil.
func readTokens(r memory.Reader, bo binary.ByteOrder, tt, ti uint64) (*tokens, binary.ByteOrder, uint64, error) {
	var raw [tokenIndexSize]byte
	if err := memory.ReadFull(r, raw[:], ti); err != nil {
		return nil, nil, 0, fmt.Errorf("kallsyms: token_index at %#x: %w", ti, err)
	}
	orders := []binary.ByteOrder{bo}
	if bo == nil {
		orders = []binary.ByteOrder{binary.LittleEndian, binary.BigEndian}
	}
	var idx [256]uint16
	var err error
	for _, o := range orders {
		err = nil
		for i := range idx {
			idx[i] = o.Uint16(raw[2*i:])
			if i == 0 && idx[0] != 0 || i > 0 && idx[i] <= idx[i-1] {
				err = corrupt(ti+uint64(2*i), uint64(idx[i]), "token_index[%d] is not 0 and strictly increasing", i)
				break
			}
		}
		if err == nil {
			bo = o
			break
		}
	}
	if err != nil {
		return nil, nil, 0, err
	}
	// The table ends at the NUL of entry 255, at most maxTokenLen after
	// its start; when token_index follows it, it ends before.
	size := uint64(idx[255]) + maxTokenLen + 1
	if ti > tt && ti-tt < size {
		size = ti - tt
	}
	if tt+size < tt {
		return nil, nil, 0, corrupt(tt, size, "token_table wraps the address space")
	}
	tab := make([]byte, size)
	if n, err := t0read(r, tab, tt); n <= int(idx[255]) {
		return nil, nil, 0, fmt.Errorf("kallsyms: token_table at %#x: %w", tt, err)
	} else {
		tab = tab[:n]
	}
	for i := range 256 {
		s := int(idx[i])
		if s >= len(tab) {
			return nil, nil, 0, corrupt(tt+uint64(s), uint64(i), "token %d starts past the token table", i)
		}
		e := s
		for e < len(tab) && tab[e] != 0 {
			e++
		}
		if e == len(tab) || e-s > maxTokenLen || i < 255 && e+1 != int(idx[i+1]) {
			return nil, nil, 0, corrupt(tt+uint64(s), uint64(i), "token %d does not end where token %d starts", i, i+1)
		}
		if i == 255 {
			tab = tab[:e+1]
		}
	}
	return newTokens(tab, &idx), bo, uint64(len(tab)), nil
}

// t0read reads as much of p at addr as the reader gives.
func t0read(r memory.Reader, p []byte, addr uint64) (int, error) {
	n, err := r.ReadAt(p, addr)
	if n == len(p) {
		err = nil
	} else if err == nil {
		err = memory.Fault(addr+uint64(n), "", "short read", memory.ErrNotSaved)
	}
	return n, err
}

// readChunked reads size bytes at addr, allocating at most readChunk at a
// time, so a size that lies fails on missing memory before it allocates.
func readChunked(r memory.Reader, addr, size uint64, what string) ([]byte, error) {
	if addr+size < addr {
		return nil, corrupt(addr, size, "%s of %d bytes wraps the address space", what, size)
	}
	// The buffer grows (by doubling, up to size) only as reads succeed.
	var buf []byte
	for done := uint64(0); done < size; {
		n := min(size-done, readChunk)
		if uint64(cap(buf)) < done+n {
			buf = append(make([]byte, 0, int(min(size, max(2*uint64(cap(buf)), done+n)))), buf...)
		}
		buf = buf[:done+n]
		if err := memory.ReadFull(r, buf[done:done+n], addr+done); err != nil {
			return nil, fmt.Errorf("kallsyms: %s at %#x: %w", what, addr, err)
		}
		done += n
	}
	return buf, nil
}

// readNum reads num_syms at addr: a u32, or (64-bit kernels before v4.20)
// an unsigned long whose other half is zero.
func readNum(r memory.Reader, bo binary.ByteOrder, ptr int, addr uint64) (int, error) {
	var b [8]byte
	if err := memory.ReadFull(r, b[:4], addr); err != nil {
		return 0, fmt.Errorf("kallsyms: num_syms at %#x: %w", addr, err)
	}
	v := uint64(bo.Uint32(b[:]))
	if v == 0 && ptr == 8 && bo == binary.BigEndian {
		if err := memory.ReadFull(r, b[:], addr); err == nil {
			v = bo.Uint64(b[:])
		}
	}
	if v == 0 || v > maxNumSyms {
		return 0, corrupt(addr, v, "num_syms is not in [1, %d]", maxNumSyms)
	}
	return int(v), nil
}

// checkMarkers reads m markers of msz bytes at ms and checks them against
// names at names holding n entries that end before ms: markers[0] is 0,
// steps are plausible, and the last block walks to the padding before ms.
// It returns the markers, the exact length of names and the length rule.
func checkMarkers(r memory.Reader, bo binary.ByteOrder, names, ms uint64, msz int, n int, algn uint64, bigPre bool) ([]uint32, int, bool, error) {
	m := (n + 255) / 256
	if ms <= names || ms-names < uint64(minEntry*n) {
		return nil, 0, false, corrupt(ms, uint64(n), "kallsyms_markers leave no room for %d names", n)
	}
	raw, err := readChunked(r, ms, uint64(m*msz), "kallsyms_markers")
	if err != nil {
		return nil, 0, false, err
	}
	mk := make([]uint32, m)
	for j := range mk {
		var v uint64
		if msz == 8 {
			v = bo.Uint64(raw[8*j:])
		} else {
			v = uint64(bo.Uint32(raw[4*j:]))
		}
		if j == 0 && v != 0 {
			return nil, 0, false, corrupt(ms, v, "kallsyms_markers[0] is not 0")
		}
		if j > 0 && (v < uint64(mk[j-1])+256*minEntry || v > uint64(mk[j-1])+maxMarkerStep) {
			return nil, 0, false, corrupt(ms+uint64(j*msz), v, "kallsyms_markers[%d] is not 256 plausible names after the previous marker", j)
		}
		mk[j] = uint32(v)
	}
	last := names + uint64(mk[m-1])
	if last >= ms {
		return nil, 0, false, corrupt(ms+uint64((m-1)*msz), uint64(mk[m-1]), "the last marker points past the names")
	}
	tail, err := readChunked(r, last, ms-last, "last names block")
	if err != nil {
		return nil, 0, false, err
	}
	count := n - 256*(m-1)
	for _, big := range []bool{bigPre, !bigPre} {
		end, sawBig := walk(tail, 0, count, big)
		if end >= 0 && ms-(last+uint64(end)) < algn {
			return mk, int(mk[m-1]) + end, big, nil
		}
		if !sawBig {
			break
		}
	}
	return nil, 0, false, corrupt(last, uint64(count), "the last %d names do not end at kallsyms_markers %#x", count, ms)
}

// fromAddrs locates the tables from known addresses (VMCOREINFO or
// Options.Tables): token_table, token_index, names, and optionally the
// others.
func fromAddrs(r memory.Reader, c config, a TableAddrs, src Source) (*located, error) {
	tok, bo, ttSize, err := readTokens(r, c.bo, a.TokenTable, a.TokenIndex)
	if err != nil {
		return nil, err
	}
	if a.TokenIndex > a.TokenTable && a.TokenIndex-(a.TokenTable+ttSize) >= uint64(c.ptr) {
		return nil, corrupt(a.TokenIndex, a.TokenIndex-a.TokenTable, "token_index does not follow token_table")
	}
	var errs []error
	numAddrs := []uint64{a.NumSyms}
	if a.NumSyms == 0 {
		// num_syms is the label before names (docs/formats.md §7.5).
		numAddrs = []uint64{a.Names - 8, a.Names - 4}
	}
	for _, na := range numAddrs {
		n, err := readNum(r, bo, c.ptr, na)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, algn := range c.algns {
			for _, msz := range markerSizes(c.ptr) {
				for _, mc := range markerCands(a, n, msz, algn) {
					mk, namesLen, big, err := checkMarkers(r, bo, a.Names, mc.ms, msz, n, algn, c.bigPre)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					t := &tables{r: r, bo: bo, tok: tok, n: n, big: big, markers: mk, namesLen: namesLen}
					t.lay = Layout{
						Source: src, Target: memory.Target{ByteOrder: bo, PtrSize: c.ptr}, Align: int(algn), NumSyms: n, BigNames: big,
						NumSymsTable: Region{na, 4},
						Names:        Region{a.Names, uint64(namesLen)},
						Markers:      Region{mc.ms, uint64(msz * len(mk))}, MarkerSize: msz,
						TokenTable: Region{a.TokenTable, ttSize},
						TokenIndex: Region{a.TokenIndex, tokenIndexSize},
					}
					l := &located{t: t, algn: algn, seqs: mc.seqs, order: mc.order}
					if a.SeqsOfNames != 0 {
						l.seqs = a.SeqsOfNames
					}
					l.cands = addrCands(l, a)
					return l, nil
				}
			}
		}
	}
	return nil, candidates(nil, len(errs), errs, "no layout around kallsyms_names %#x validates", a.Names)
}

func markerSizes(ptr int) []int {
	if ptr == 8 {
		return []int{4, 8} // u32 from v4.20, unsigned long before
	}
	return []int{4}
}

type markerCand struct {
	ms, seqs uint64
	order    string
}

// markerCands lists where markers may start: directly before token_table
// (v4.6–v6.1 and v6.4+), or before a seqs_of_names that precedes
// token_table (v6.2–v6.3 and 6.1.y).
func markerCands(a TableAddrs, n, msz int, algn uint64) []markerCand {
	if a.Markers != 0 {
		return []markerCand{{ms: a.Markers}}
	}
	m := uint64((n + 255) / 256)
	mb := alignUp(m*uint64(msz), algn)
	sb := alignUp(3*uint64(n), algn)
	tt := a.TokenTable
	var out []markerCand
	if tt > mb {
		out = append(out, markerCand{ms: tt - mb})
	}
	if tt > mb+sb {
		out = append(out, markerCand{ms: tt - sb - mb, seqs: tt - sb, order: "v6.2"})
	}
	return out
}

// addrCands lists the address tables to try.
func addrCands(l *located, a TableAddrs) []addrCand {
	t := l.t
	ptr := uint64(t.lay.PtrSize)
	n := uint64(t.n)
	ti := t.lay.TokenIndex.Addr
	// After the address table: relative_base (before v7.0), then
	// seqs_of_names (v6.4 order).
	after := func(table, width uint64, rel bool) (uint64, uint64) {
		end := table + width*n
		if !rel {
			return 0, alignUp(end, l.algn)
		}
		rb := alignUp(end, ptr)
		return rb, alignUp(rb+ptr, l.algn)
	}
	order := func(table uint64) string {
		if table > ti {
			return "v6.4"
		}
		if l.order != "" {
			return l.order
		}
		return "v4.6"
	}
	seqsFor := func(table, seqs uint64) uint64 {
		if table > ti {
			return seqs
		}
		return 0
	}
	var out []addrCand
	switch {
	case a.Addresses != 0:
		_, s := after(a.Addresses, ptr, false)
		out = append(out, addrCand{encs: []Encoding{Absolute}, table: a.Addresses, seqs: seqsFor(a.Addresses, s), order: order(a.Addresses)})
	case a.Offsets != 0:
		rb := a.RelativeBase
		if rb != 0 {
			_, s := after(a.Offsets, 4, true)
			out = append(out, addrCand{encs: []Encoding{BaseRelative, AbsolutePercpu, PlaceRelative, Offsets32}, table: a.Offsets, relBase: rb, seqs: seqsFor(a.Offsets, s), order: order(a.Offsets)})
		} else {
			_, s := after(a.Offsets, 4, false)
			out = append(out, addrCand{encs: []Encoding{PlaceRelative, Offsets32}, table: a.Offsets, seqs: seqsFor(a.Offsets, s), order: order(a.Offsets)})
		}
	default:
		// Derive from the layout (docs/formats.md §7.6). Before v6.4 the
		// table precedes num_syms: relative_base fills the ALGN slot
		// right before it, the offsets end before that.
		ns := t.lay.NumSymsTable.Addr
		if ns > ptr {
			rb := ns - ptr
			if rb > 4*n {
				out = append(out, addrCand{encs: []Encoding{BaseRelative, AbsolutePercpu}, table: alignDown(rb-4*n, l.algn), relBase: rb, order: order(0)})
			}
			if ns > ptr*n {
				out = append(out, addrCand{encs: []Encoding{Absolute}, table: alignDown(ns-ptr*n, l.algn), order: order(0)})
			}
		}
		// From v6.4 it follows token_index.
		off := alignUp(ti+tokenIndexSize, l.algn)
		rb, s := after(off, 4, true)
		out = append(out, addrCand{encs: []Encoding{BaseRelative, AbsolutePercpu}, table: off, relBase: rb, seqs: s, order: "v6.4"})
		_, s = after(off, 4, false)
		out = append(out, addrCand{encs: []Encoding{PlaceRelative, Offsets32}, table: off, seqs: s, order: "v6.4"})
		_, s = after(off, ptr, false)
		out = append(out, addrCand{encs: []Encoding{Absolute}, table: off, seqs: s, order: "v6.4"})
	}
	if a.SeqsOfNames != 0 {
		for i := range out {
			out[i].seqs = a.SeqsOfNames
		}
	}
	return out
}
