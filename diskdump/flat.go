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
	// One ReadAt per record header; record data is never read here. The
	// loop advances by at least one header per record, so it ends.
	var recs []flatSeg
	pos := int64(flatHeaderSize)
	var rh [flatRecordHeader]byte
	for {
		if pos == fileSize {
			break // no end marker: accept a stream cut at a record boundary
		}
		if pos+flatRecordHeader > fileSize {
			return nil, formatErr(pos, uint64(fileSize-pos), "flattened record header truncated")
		}
		if _, err := r.ReadAt(rh[:], pos); err != nil {
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
	}
	segs := resolveOverlaps(recs)
	f := &flatReader{r: r, segs: segs}
	if len(segs) > 0 {
		last := segs[len(segs)-1]
		f.size = last.off + last.n
	}
	return f, nil
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
