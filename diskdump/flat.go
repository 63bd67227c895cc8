package diskdump

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// flatSeg maps logical offsets [off, off+n) of the rearranged file to file
// offsets [fileOff, fileOff+n) of the flattened stream.
type flatSeg struct {
	off, n, fileOff int64
}

// flatReader reads a flattened stream as if it had been rearranged by
// makedumpfile -R: a logical offset is looked up in a sorted,
// non-overlapping segment list and read in place. Holes between records
// read as zeros, like the sparse file -R would write.
type flatReader struct {
	r    io.ReaderAt
	segs []flatSeg
	size int64 // logical size: end of the last segment
}

// isFlattened reports whether hdr (at least 32 bytes of file offset 0)
// starts a flattened stream, and whether its type and version are known.
func isFlattened(hdr []byte) (flat, known bool) {
	if len(hdr) < 32 || !bytes.Equal(hdr[:16], []byte(sigFlat+"\x00\x00\x00\x00")) {
		return false, false
	}
	return true, binary.BigEndian.Uint64(hdr[16:]) == flatTypeHeader &&
		binary.BigEndian.Uint64(hdr[24:]) == flatVersion
}

// newFlatReader indexes the flattened stream in r (fileSize bytes) in one
// pass over its record headers. Every record must lie within the file; the
// stream ends at the end marker (offset -1) or exactly at end of file.
// Errors wrap ErrCorrupt and name the record's file offset.
func newFlatReader(r io.ReaderAt, fileSize int64) (*flatReader, error) {
	var hdr [32]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("diskdump: flattened header: %w", noEOF(err))
	}
	if flat, known := isFlattened(hdr[:]); !flat {
		return nil, ErrUnrecognizedFormat
	} else if !known {
		return nil, formatErr(16, binary.BigEndian.Uint64(hdr[16:]), "unknown flattened header type or version")
	}
	// The loop advances by at least one header per record, so it ends.
	var recs []flatSeg
	pos := int64(flatHeaderSize)
	hr := flatHeaders{r: r}
	small, ahead := false, false // the last record is small; so is the one before
	for {
		if pos == fileSize {
			break // no end marker: accept a stream cut at a record boundary
		}
		if pos+flatRecordHeader > fileSize {
			return nil, formatErr(pos, uint64(fileSize-pos), "flattened record header truncated")
		}
		rh, err := hr.at(pos, fileSize, ahead)
		if err != nil {
			return nil, fmt.Errorf("diskdump: flattened record at %#x: %w", pos, noEOF(err))
		}
		off := int64(binary.BigEndian.Uint64(rh[0:]))
		n := int64(binary.BigEndian.Uint64(rh[8:]))
		if off == -1 {
			break
		}
		if off < 0 {
			return nil, formatErr(pos, uint64(off), "flattened record with negative target offset")
		}
		data := pos + flatRecordHeader
		if n < 0 || n > fileSize-data {
			return nil, formatErr(pos, uint64(n), "flattened record size beyond end of file")
		}
		if off > 1<<62 || n > 1<<62-off {
			return nil, formatErr(pos, uint64(off), "flattened record target offset out of range")
		}
		if n > 0 {
			recs = append(recs, flatSeg{off: off, n: n, fileOff: data})
		}
		pos = data + n
		ahead, small = small && n < flatSmallRecord, n < flatSmallRecord
	}
	segs := resolveOverlaps(recs)
	f := &flatReader{r: r, segs: segs}
	if len(segs) > 0 {
		last := segs[len(segs)-1]
		f.size = last.off + last.n
	}
	return f, nil
}

// Reading record headers. Each ReadAt of a file is a system call, but
// copying out of the page cache is not free either: reading QEMU's file
// (16 KiB records) in 4 KiB chunks took three times as long as a 16-byte
// read per header, and in 1 MiB chunks six times. So headers are read one
// at a time and the data between them skipped, unless records are small:
// after two records in a row smaller than flatSmallRecord, the next
// flatWindow bytes are read at once and the headers within them taken from
// memory. One small record is not enough: makedumpfile alternates records
// of a few hundred bytes of page descriptors with 64 KiB of page data.
const (
	flatSmallRecord = 1 << 10
	flatWindow      = 16 << 10
)

// flatHeaders reads the record headers of a flattened stream.
type flatHeaders struct {
	r      io.ReaderAt
	rh     [flatRecordHeader]byte
	win    []byte // stream bytes read ahead, from file offset winOff
	winOff int64
	buf    []byte // flatWindow bytes behind win, allocated when first needed
}

// at returns the record header at file offset pos, where pos+16 <=
// fileSize. With ahead set, a header not already read ahead is read
// together with the bytes after it, up to flatWindow. The result is valid
// until the next call.
func (h *flatHeaders) at(pos, fileSize int64, ahead bool) ([]byte, error) {
	if k := pos - h.winOff; k >= 0 && k <= int64(len(h.win))-flatRecordHeader {
		return h.win[k : k+flatRecordHeader], nil
	}
	if !ahead {
		if _, err := h.r.ReadAt(h.rh[:], pos); err != nil {
			return nil, err
		}
		return h.rh[:], nil
	}
	if h.buf == nil {
		h.buf = make([]byte, flatWindow)
	}
	m, err := h.r.ReadAt(h.buf[:min(int64(len(h.buf)), fileSize-pos)], pos)
	if m < flatRecordHeader {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	// A short read past the header (a file cut since it was sized) keeps
	// what it got; the read at the next header reports the error.
	h.win, h.winOff = h.buf[:m], pos
	return h.win[:flatRecordHeader], nil
}

// resolveOverlaps turns records in stream order into sorted, non-overlapping
// segments where a later record wins over an earlier one, as when the
// records are replayed into a file.
func resolveOverlaps(recs []flatSeg) []flatSeg {
	sorted := true
	for i := 1; i < len(recs); i++ {
		if recs[i].off < recs[i-1].off+recs[i-1].n {
			sorted = false
			break
		}
	}
	if sorted {
		return mergeAdjacent(recs)
	}
	// Writers put records out of order without overlapping them (QEMU
	// flushes its page-descriptor and page-data buffers in turn; a
	// makedumpfile stream has hundreds of such records). Disjoint records
	// need no sweep: their order in the stream does not matter.
	byOff := slices.Clone(recs)
	slices.SortFunc(byOff, func(a, b flatSeg) int { return cmpInt64(a.off, b.off) })
	disjoint := true
	for i := 1; i < len(byOff); i++ {
		if byOff[i].off < byOff[i-1].off+byOff[i-1].n {
			disjoint = false
			break
		}
	}
	if disjoint {
		return mergeAdjacent(byOff)
	}
	return sweepOverlaps(recs)
}

// sweepOverlaps is resolveOverlaps for records that overlap: it sweeps
// over every boundary with a max-heap of the records covering the current
// point, keyed by stream order (later wins).
func sweepOverlaps(recs []flatSeg) []flatSeg {
	type rec struct {
		flatSeg
		seq int
	}
	rs := make([]rec, len(recs))
	bounds := make([]int64, 0, 2*len(recs))
	for i, s := range recs {
		rs[i] = rec{s, i}
		bounds = append(bounds, s.off, s.off+s.n)
	}
	slices.SortStableFunc(rs, func(a, b rec) int { return cmpInt64(a.off, b.off) })
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	var h seqHeap
	out := make([]flatSeg, 0, len(recs))
	next := 0
	for bi := 0; bi+1 < len(bounds); bi++ {
		x, end := bounds[bi], bounds[bi+1]
		for next < len(rs) && rs[next].off == x {
			heap.Push(&h, heapItem{seq: rs[next].seq, end: rs[next].off + rs[next].n})
			next++
		}
		for h.Len() > 0 && h[0].end <= x {
			heap.Pop(&h)
		}
		if h.Len() == 0 {
			continue
		}
		top := recs[h[0].seq]
		out = append(out, flatSeg{off: x, n: end - x, fileOff: top.fileOff + (x - top.off)})
	}
	return mergeAdjacent(out)
}

// mergeAdjacent joins segments that continue each other both logically and
// in the file.
func mergeAdjacent(segs []flatSeg) []flatSeg {
	out := segs[:0:0]
	for _, s := range segs {
		if k := len(out) - 1; k >= 0 && out[k].off+out[k].n == s.off && out[k].fileOff+out[k].n == s.fileOff {
			out[k].n += s.n
			continue
		}
		out = append(out, s)
	}
	return slices.Clip(out)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type heapItem struct {
	seq int
	end int64
}

type seqHeap []heapItem

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i].seq > h[j].seq }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(heapItem)) }
func (h *seqHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Size returns the logical size of the rearranged file.
func (f *flatReader) Size() int64 { return f.size }

// ReadAt reads the rearranged file at logical offset off. Holes read as
// zeros; reading past the logical end returns io.EOF.
func (f *flatReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("diskdump: negative offset %d", off)
	}
	n := 0
	// First segment ending after off.
	i, _ := slices.BinarySearchFunc(f.segs, off, func(s flatSeg, t int64) int {
		if s.off+s.n <= t {
			return -1
		}
		return 1
	})
	for n < len(p) {
		if off >= f.size {
			return n, io.EOF
		}
		s := f.segs[i]
		if off < s.off { // hole
			k := int(min(int64(len(p)-n), s.off-off))
			clear(p[n : n+k])
			n += k
			off += int64(k)
			continue
		}
		k := int(min(int64(len(p)-n), s.off+s.n-off))
		m, err := f.r.ReadAt(p[n:n+k], s.fileOff+(off-s.off))
		n += m
		off += int64(m)
		if m < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		i++
	}
	return n, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Flattened is the file a flattened stream (makedumpfile -F) rebuilds,
// read in place: a kdump-compressed file, which NewDump reads directly, or
// with makedumpfile -E -F an ELF core, which a caller hands to package
// elfcore.
type Flattened struct{ f *flatReader }

// OpenFlattened indexes the flattened stream of size bytes in r. Errors
// wrap ErrUnrecognizedFormat when r is not a flattened stream, and
// ErrCorrupt (a *FormatError naming the record's offset) when its records
// are inconsistent.
func OpenFlattened(r io.ReaderAt, size int64) (*Flattened, error) {
	f, err := newFlatReader(r, size)
	if err != nil {
		return nil, err
	}
	return &Flattened{f}, nil
}

// Size returns the size of the rebuilt file.
func (f *Flattened) Size() int64 { return f.f.Size() }

// ReadAt reads the rebuilt file at offset off; holes between records read
// as zeros.
func (f *Flattened) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
