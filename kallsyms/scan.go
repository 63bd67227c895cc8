package kallsyms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// digitRun is token_table entries 0x30–0x39: every kernel has the digits
// in some name, so each is its own one-character token (all generations;
// docs/formats.md §7.2).
var digitRun = []byte("0\x001\x002\x003\x004\x005\x006\x007\x008\x009\x00")

// tokenBackWindow is how far before the '0' entry a candidate is read: 47
// tokens of at most a few dozen characters (longest in the corpus: 22).
const tokenBackWindow = 4096

// tokenFwdWindow covers the rest of the table (the corpus kernels' tables
// are at most 1108 bytes in all) and token_index after it.
const tokenFwdWindow = 8192

// Bounds on a scan's work. A digit run costs at most tokenBackWindow +
// tokenFwdWindow bytes read; a token table that validates with its
// token_index costs a read back of up to ~13 MiB per label alignment and
// marker size. Real images hold one token table and a digit run or two
// elsewhere (docs/formats.md §7.2); an image filled with decoys (hostile, or
// garbage that repeats one) would otherwise take hours and build an error
// of hundreds of MiB.
const (
	maxScanHits   = 1024 // digit runs examined
	maxScanTables = 8    // of which token tables that validate
	maxScanErrs   = 8    // candidate errors kept in the ErrNotFound
)

// minScanMarkers is the fewest markers a scan accepts: a kernel with
// kallsyms has tens of thousands of symbols (30k–250k observed), and a
// single zero word, which is all one marker is, occurs everywhere.
const minScanMarkers = 2

// scan looks for the tables in the kernel image, for kernels whose
// VMCOREINFO does not export them (< v6.0): the token table by its digit
// run, token_index by its offsets, then markers, names and num_syms walking
// back from it (docs/formats.md §7). A candidate counts only when every check
// passes, including the address encoding's _stext test.
func scan(r memory.Reader, c config, opt Options) (*located, error) {
	start := opt.ImageStart
	if start == 0 {
		start, _ = c.info.Symbol("_stext")
	}
	if start == 0 {
		start, _ = c.info.Symbol("_text")
	}
	if start == 0 {
		return nil, fmt.Errorf("%w: the kernel image start for a scan (SYMBOL(_stext), SYMBOL(_text) or Options.ImageStart)", ErrMissingInfo)
	}
	end := opt.ImageEnd
	if end == 0 || end <= start {
		end = start + DefaultScanWindow
		if end < start {
			end = ^uint64(0)
		}
	}
	var errs []error
	hits, tables := 0, 0
	// The read buffer starts at scanFirstRead and doubles, up to
	// readChunk, with each read that fills it: scans of a small image, of
	// one that ends in missing memory early, or of a caller's narrow
	// ImageStart/ImageEnd should not allocate 4 MiB each.
	chunk := make([]byte, min(uint64(scanFirstRead), end-start))
	for a := start; a < end; {
		size := min(uint64(len(chunk)), end-a)
		n, _ := t0read(r, chunk[:size], a)
		buf := chunk[:n]
		for off := 0; ; {
			i := bytes.Index(buf[off:], digitRun)
			if i < 0 {
				break
			}
			hit := a + uint64(off+i)
			off += i + 1
			// v2e's rejection: in a real table ':' is a multi-character
			// token, never ":\0" (held on every Debian dump).
			if k := off - 1 + len(digitRun); k+1 < len(buf) && buf[k] == ':' && buf[k+1] == 0 {
				continue
			}
			if hits >= maxScanHits || tables >= maxScanTables {
				return nil, scanErr(start, end, hits, errs, fmt.Sprintf("; gave up at %#x after %d candidate token tables, %d valid", hit, hits, tables))
			}
			hits++
			l, deep, err := tryHit(r, c, start, hit)
			if err == nil {
				return l, nil
			}
			if deep {
				tables++
			}
			if len(errs) < maxScanErrs {
				if deep {
					err = fmt.Errorf("candidate token table near %#x (%w): %w", hit, errDeep, err)
				} else {
					err = fmt.Errorf("candidate token table near %#x: %w", hit, err)
				}
				errs = append(errs, err)
			}
		}
		if n < int(size) {
			// Skip the page that faulted.
			a = alignDown(a+uint64(n), c.page) + c.page
			continue
		}
		if size < uint64(len(digitRun)) || a+size >= end {
			break
		}
		a += size - uint64(len(digitRun)) + 1
		if full := uint64(readChunk + len(digitRun)); uint64(len(chunk)) < full {
			chunk = make([]byte, min(2*uint64(len(chunk)), full, end-a))
		}
	}
	return nil, scanErr(start, end, hits, errs, "")
}

// scanErr is the ErrNotFound of a scan of [start, end) that examined hits
// candidates and kept errs of their errors.
func scanErr(start, end uint64, hits int, errs []error, why string) error {
	if len(errs) == 0 {
		return fmt.Errorf("%w in [%#x, %#x)%s", ErrNotFound, start, end, why)
	}
	e := candidates(ErrNotFound, hits, errs, "tables not found in [%#x, %#x)%s", start, end, why)
	// A candidate whose token table and index validated got furthest.
	for i, err := range errs {
		if errors.Is(err, errDeep) {
			e.Nearest = i
			break
		}
	}
	return e
}

// errDeep marks the error of a scan candidate whose token table and
// token_index validated, so that it is shown as the nearest miss.
var errDeep = errors.New("token table and token_index validate")

// tryHit checks one digit run: token table and index, then the rest. deep
// reports that the token table and token_index validated.
func tryHit(r memory.Reader, c config, imgStart, hit uint64) (l *located, deep bool, err error) {
	tt, ti, bo, err := findTokenIndex(r, c, imgStart, hit)
	if err != nil {
		return nil, false, err
	}
	tok, bo, ttSize, err := readTokens(r, bo, tt, ti)
	if err != nil {
		return nil, false, err
	}
	c.bo = bo
	var errs []error
	for _, algn := range c.algns {
		if tt%algn != 0 || ti%algn != 0 {
			continue
		}
		for _, msz := range markerSizes(c.ptr) {
			if uint64(msz) > algn {
				continue
			}
			l, err := findNames(r, c, imgStart, tt, algn, msz)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			t := l.t
			t.tok = tok
			t.lay.Source, t.lay.ScanHit = SourceScan, tt
			t.lay.TokenTable = Region{tt, ttSize}
			t.lay.TokenIndex = Region{ti, tokenIndexSize}
			l.cands = addrCands(l, TableAddrs{})
			if err := choose(l, c.info); err != nil {
				errs = append(errs, err)
				continue
			}
			l.chosen = true
			return l, true, nil
		}
	}
	if len(errs) == 0 {
		return nil, true, corrupt(tt, 0, "token table not aligned as a label")
	}
	return nil, true, candidates(nil, len(errs), errs, "no layout before the token table at %#x validates", tt)
}

// findTokenIndex finds the start of token_table and token_index from the
// address of the '0' entry. Walking back to entry 0 is unreliable (the byte
// before the table belongs to the previous one), so it walks back 47
// strings to entry 1, forward to entry 255, and finds token_index as the
// u16 array of the offsets measured, which also fixes entry 0's length and
// the byte order.
func findTokenIndex(r memory.Reader, c config, imgStart, hit uint64) (tt, ti uint64, bo binary.ByteOrder, err error) {
	lo := imgStart
	if hit-imgStart > tokenBackWindow {
		lo = hit - tokenBackWindow
	}
	buf := make([]byte, hit-lo+tokenFwdWindow)
	n, rerr := t0read(r, buf, lo)
	if n < int(hit-lo) {
		// The page before may be absent; start at the hit's page.
		lo = alignDown(hit, c.page)
		buf = buf[:hit-lo+tokenFwdWindow]
		n, rerr = t0read(r, buf, lo)
		if n < int(hit-lo) {
			return 0, 0, nil, rerr
		}
	}
	buf = buf[:n]
	p := int(hit - lo)
	// Back 47 strings: entries 0x2f down to 1.
	pos := p
	for range 47 {
		q := pos - 1
		if q < 0 || buf[q] != 0 {
			return 0, 0, nil, corrupt(lo+uint64(max(q, 0)), 0, "token table: no NUL before an entry")
		}
		s := q
		for s > 0 && buf[s-1] != 0 && q-s < maxTokenLen {
			s--
		}
		if s == 0 {
			return 0, 0, nil, corrupt(lo, 0, "token table: entries run past the read window")
		}
		pos = s
	}
	e1 := pos
	// Forward 255 strings: entries 1..255.
	var rel [256]int
	q := e1
	for i := 1; i < 256; i++ {
		rel[i] = q - e1
		k := bytes.IndexByte(buf[q:min(len(buf), q+maxTokenLen+1)], 0)
		if k < 0 {
			return 0, 0, nil, corrupt(lo+uint64(q), uint64(i), "token table: entry %d has no NUL", i)
		}
		q += k + 1
	}
	ttEnd := q
	orders := []binary.ByteOrder{binary.LittleEndian, binary.BigEndian}
	if c.bo != nil {
		orders = []binary.ByteOrder{c.bo}
	}
	// token_index follows at the next label boundary (padding < 8).
	for pad := 0; pad < 8; pad++ {
		x := ttEnd + pad
		if (lo+uint64(x))%2 != 0 || x+tokenIndexSize > len(buf) {
			continue
		}
		for _, o := range orders {
			if o.Uint16(buf[x:]) != 0 {
				continue
			}
			v1 := int(o.Uint16(buf[x+2:])) // entry 0's length + 1
			s0 := e1 - v1
			if v1 < 1 || s0 < 0 || bytes.IndexByte(buf[s0:e1-1], 0) >= 0 || (lo+uint64(s0))%4 != 0 {
				continue
			}
			ok := true
			for i := 1; i < 256 && ok; i++ {
				ok = int(o.Uint16(buf[x+2*i:])) == v1+rel[i]
			}
			if ok {
				return lo + uint64(s0), lo + uint64(x), o, nil
			}
		}
	}
	return 0, 0, nil, corrupt(lo+uint64(ttEnd), 0, "no token_index after the token table")
}

// findNames finds markers (directly before token_table, or before a
// seqs_of_names that precedes it), then names and num_syms before them,
// and walks every name against the markers.
func findNames(r memory.Reader, c config, imgStart, tt uint64, algn uint64, msz int) (*located, error) {
	// Everything before token_table that can belong to the tables:
	// seqs_of_names (3 bytes a symbol), markers, names.
	back := uint64(3*maxNumSyms + msz*maxNumSyms/256 + 64)
	lo := imgStart
	if tt-imgStart > back {
		lo = tt - back
	}
	// Read backwards in chunks until a candidate validates or memory ends.
	var win []byte // [winLo, tt)
	winLo := tt
	bo := c.bo
	elem := func(at uint64) uint64 { // at >= winLo
		if msz == 8 {
			return bo.Uint64(win[at-winLo:])
		}
		return uint64(bo.Uint32(win[at-winLo:]))
	}
	var errs []error
	tried := 0
	// Candidate marker starts from tt downwards, aligned to algn.
	for ms := alignDown(tt-uint64(msz), algn); ms >= lo && ms+uint64(msz) <= tt; ms -= algn {
		if ms < winLo {
			step := max(uint64(readChunk), winLo-ms)
			nlo := winLo - min(step, winLo-lo)
			more, err := readBack(r, nlo, winLo, c.page)
			win = append(more, win...)
			winLo -= uint64(len(more))
			if ms < winLo {
				// Memory before is missing (freed init pages are
				// filtered out of makedumpfile dumps): stop here.
				if err != nil {
					errs = append(errs, err)
				}
				break
			}
		}
		if elem(ms) != 0 {
			continue
		}
		// Run of plausible markers from ms.
		run := 1
		for at := ms + uint64(msz); at+uint64(msz) <= tt; at += uint64(msz) {
			d := elem(at) - elem(at-uint64(msz))
			if elem(at) < elem(at-uint64(msz)) || d < 256*minEntry || d > maxMarkerStep {
				break
			}
			run++
		}
		for m := run; m >= minScanMarkers; m-- {
			mb := alignUp(uint64(m*msz), algn)
			if ms+mb > tt {
				continue
			}
			gap := tt - (ms + mb)
			var nlo, nhi int // num_syms range the gap allows
			var seqs uint64
			switch {
			case gap == 0:
				nlo, nhi = 256*(m-1)+1, 256*m
			case gap%algn == 0 && gap >= 3:
				// seqs_of_names of 3n bytes, padded to algn.
				nlo, nhi = max(256*(m-1)+1, int((gap-algn)/3)+1), min(256*m, int(gap/3))
				seqs = ms + mb
			default:
				continue
			}
			if nlo > nhi {
				continue
			}
			tried++
			l, err := namesBefore(r, c, ms, m, msz, algn, nlo, nhi, elem(ms+uint64((m-1)*msz)), lo)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			l.seqs = seqs
			if seqs != 0 {
				l.order = "v6.2"
			}
			return l, nil
		}
	}
	if tried == 0 {
		errs = append(errs, corrupt(tt, 0, "no kallsyms_markers before the token table"))
	}
	return nil, candidates(nil, tried, errs, "no kallsyms_markers before the token table at %#x fit", tt)
}

// namesBefore finds names and num_syms before markers at ms: names start
// at a label boundary S with num_syms in the label before it, and the last
// block, from S+last, walks to the padding before ms.
func namesBefore(r memory.Reader, c config, ms uint64, m, msz int, algn uint64, nlo, nhi int, last uint64, lo uint64) (*located, error) {
	if last >= ms {
		return nil, corrupt(ms, last, "last marker beyond the markers")
	}
	span := last + maxMarkerStep + 16
	from := lo
	if ms-lo > span {
		from = ms - span
	}
	buf, err := readChunked(r, from, ms-from, "kallsyms_names")
	if err != nil {
		return nil, err
	}
	at := func(a uint64) []byte { return buf[a-from:] }
	numAt := uint64(algn) // num_syms's label fills the ALGN slot before names
	if msz == 8 {
		numAt = 8
	}
	var errs []error
	for S := alignDown(ms-last-minEntry, algn); S >= from+numAt && S+last < ms; S -= algn {
		var n uint64
		if msz == 8 {
			n = c.bo.Uint64(at(S - 8))
		} else {
			n = uint64(c.bo.Uint32(at(S - numAt)))
		}
		if n < uint64(nlo) || n > uint64(nhi) {
			continue
		}
		count := int(n) - 256*(m-1)
		names := at(S)[:ms-S]
		var big bool
		var endOff int
		found := false
		for _, b := range []bool{c.bigPre, !c.bigPre} {
			e, sawBig := walk(names, int(last), count, b)
			if e >= 0 && ms-(S+uint64(e)) < algn {
				big, endOff, found = b, e, true
				break
			}
			if !sawBig {
				break
			}
		}
		if !found {
			continue
		}
		mk, _, _, err := checkMarkers(r, c.bo, S, ms, msz, int(n), algn, big)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Every name must land on its marker.
		off := 0
		okAll := true
		for i := 0; i < int(n) && okAll; i++ {
			if i&255 == 0 && uint32(off) != mk[i>>8] {
				okAll = false
				break
			}
			_, next, ok := entry(names, off, big)
			okAll = ok
			off = next
		}
		if !okAll || off != endOff {
			errs = append(errs, corrupt(S, n, "names at %#x do not land on every marker", S))
			continue
		}
		t := &tables{r: r, bo: c.bo, n: int(n), big: big, markers: mk, namesLen: endOff, whole: names[:endOff]}
		t.lay = Layout{
			Target: memory.Target{ByteOrder: c.bo, PtrSize: c.ptr}, Align: int(algn), NumSyms: int(n), BigNames: big,
			NumSymsTable: Region{S - numAt, uint64(msz)},
			Names:        Region{S, uint64(endOff)},
			Markers:      Region{ms, uint64(msz * m)}, MarkerSize: msz,
		}
		return &located{t: t, algn: algn}, nil
	}
	if len(errs) == 0 {
		return nil, corrupt(ms, uint64(m), "no names and num_syms fit kallsyms_markers at %#x", ms)
	}
	return nil, candidates(nil, len(errs), errs, "no names and num_syms fit kallsyms_markers at %#x", ms)
}

// readBack reads the longest readable tail of [lo, hi): in 64 KiB pieces
// from hi downwards, then page by page inside the piece that faults. It
// returns the bytes read and the fault that stopped it, if any.
func readBack(r memory.Reader, lo, hi, page uint64) ([]byte, error) {
	const piece = 64 << 10
	out := make([]byte, hi-lo)
	at := hi
	for at > lo {
		plo := max(lo, at-min(at-lo, piece))
		if err := memory.ReadFull(r, out[plo-lo:at-lo], plo); err != nil {
			for at > plo {
				glo := max(plo, alignDown(at-1, page))
				if err := memory.ReadFull(r, out[glo-lo:at-lo], glo); err != nil {
					return out[at-lo:], err
				}
				at = glo
			}
			continue
		}
		at = plo
	}
	return out, nil
}
