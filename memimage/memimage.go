package memimage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/klauspost/compress/snappy"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Format names an image format.
type Format string

// The formats File reads.
const (
	LiME Format = "lime"
	AVML Format = "avml"
	Raw  Format = "raw"
)

// Range is a physical range held by an image, Last inclusive.
type Range struct{ Start, Last uint64 }

// File is an open memory image. Its methods and its physical reader are
// safe for concurrent use.
type File struct {
	r      io.ReaderAt
	size   int64
	closer io.Closer
	format Format
	bo     binary.ByteOrder

	ranges []Range  // sorted by Start, disjoint
	order  []Range  // the ranges in file order, for errors
	starts []uint64 // pieces' first addresses, sorted
	pieces []piece

	mu    sync.Mutex
	cache [cachedChunks]cachedChunk
	tick  uint64
	body  []byte // a compressed chunk being read, under mu
}

type pieceKind uint8

const (
	plainPiece      pieceKind = iota // the bytes as they are in the file
	compressedChunk                  // a snappy-compressed chunk body
	storedChunk                      // an uncompressed snappy-framing chunk body
)

// piece maps [start, last] (start in File.starts) to the file: plain bytes
// at off, or one snappy chunk whose body (after the CRC) is blen bytes at
// off.
type piece struct {
	last  uint64
	off   int64
	blen  uint32
	crc   uint32
	kind  pieceKind
	rng   int32 // the range's index in file order, for errors
	start uint64
}

type cachedChunk struct {
	idx  int // piece index + 1; 0 = empty
	used uint64
	data []byte
}

// Open opens the LiME or AVML image in the named file. Close closes it.
// Errors are those of NewFile and of opening the file.
func Open(name string) (*File, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := NewFile(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.closer = fh
	return f, nil
}

// Probe reports whether r starts with a LiME or AVML range header's magic.
func Probe(r io.ReaderAt) bool {
	var b [8]byte
	if _, err := r.ReadAt(b[:], 0); err != nil {
		return false
	}
	_, _, ok := magicOf(b[:])
	return ok
}

func magicOf(b []byte) (Format, binary.ByteOrder, bool) {
	switch {
	case binary.LittleEndian.Uint32(b) == limeMagic:
		return LiME, binary.LittleEndian, true
	case binary.BigEndian.Uint32(b) == limeMagic:
		return LiME, binary.BigEndian, true
	case binary.LittleEndian.Uint32(b) == avmlMagic:
		return AVML, binary.LittleEndian, true
	}
	return "", nil, false
}

// NewFile reads the range headers of the LiME or AVML image of size bytes
// in r. The caller keeps r open while the File is used. Errors wrap
// ErrUnrecognizedFormat when the file does not start with a range header,
// and are a *FormatError (matching memory.ErrCorrupt) when a header is
// malformed, a range runs backwards, past the end of the file or over
// another (ErrOverlap), or an AVML block's chunks do not add up
// (ErrBadBlock).
func NewFile(r io.ReaderAt, size int64) (*File, error) {
	var h [headerSize]byte
	if size < 8 {
		return nil, ErrUnrecognizedFormat
	}
	if _, err := r.ReadAt(h[:8], 0); err != nil {
		return nil, fmt.Errorf("memimage: reading the first header: %w", err)
	}
	format, bo, ok := magicOf(h[:])
	if !ok {
		return nil, ErrUnrecognizedFormat
	}
	f := &File{r: r, size: size, format: format, bo: bo}
	var order []Range // ranges in file order
	var offs []int64  // their headers' offsets
	for off := int64(0); off < size; {
		i := len(order)
		if size-off < headerSize {
			e := fileErr(off, "%d bytes after range %d are too few for a range header", size-off, i-1)
			e.eof = true
			return nil, e
		}
		if _, err := r.ReadAt(h[:], off); err != nil {
			return nil, fmt.Errorf("memimage: reading range %d's header at %#x: %w", i, off, err)
		}
		magic, version := bo.Uint32(h[0:]), bo.Uint32(h[4:])
		start, last := bo.Uint64(h[8:]), bo.Uint64(h[16:])
		wantMagic, wantVersion := uint32(limeMagic), uint32(limeVersion)
		if format == AVML {
			wantMagic, wantVersion = avmlMagic, avmlVersion
		}
		switch {
		case magic != wantMagic:
			return nil, fileErr(off, "range %d: magic %#08x, want %#08x (%s) as the first range has", i, magic, wantMagic, format)
		case version != wantVersion:
			return nil, rangeErr(off, i, start, last, "%s header version %d, want %d", format, version, wantVersion)
		case last < start:
			return nil, rangeErr(off, i, start, last, "range runs backwards: its end is below its start")
		case last-start == ^uint64(0):
			return nil, rangeErr(off, i, start, last, "range covers the whole 64-bit address space")
		}
		order = append(order, Range{start, last})
		offs = append(offs, off)
		data := off + headerSize
		var err error
		if format == AVML {
			off, err = f.avmlBlock(i, start, last, data)
		} else {
			off, err = f.limeRange(i, start, last, data)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := checkOverlaps(order, func(i int) int64 { return offs[i] }); err != nil {
		return nil, err
	}
	f.finish(order)
	return f, nil
}

// limeRange adds LiME range i, whose bytes start at off, and returns the
// offset of the next header.
func (f *File) limeRange(i int, start, last uint64, off int64) (int64, error) {
	n := last - start + 1
	if left := uint64(f.size - off); n > left {
		e := rangeErr(off-headerSize, i, start, last, "range needs %d bytes of data, the file has %d left", n, left)
		e.eof = true
		return 0, e
	}
	f.pieces = append(f.pieces, piece{start: start, last: last, off: off, rng: int32(i)})
	return off + int64(n), nil
}

// avmlBlock indexes the snappy stream of AVML block i, which starts at off,
// and returns the offset after its trailer.
func (f *File) avmlBlock(i int, start, last uint64, off int64) (int64, error) {
	want := last - start + 1
	var got uint64
	var b [chunkHeaderSize + chunkCRCSize + binary.MaxVarintLen32]byte
	p := off
	sawID := false
	bad := func(at int64, eof bool, format string, args ...any) error {
		e := rangeErr(at, i, start, last, format, args...)
		e.eof, e.kind = eof, ErrBadBlock
		return e
	}
	for got < want {
		if f.size-p < chunkHeaderSize {
			return 0, bad(p, true, "the snappy stream ends after %d of the range's %d bytes", got, want)
		}
		n := min(int64(len(b)), f.size-p)
		if _, err := f.r.ReadAt(b[:n], p); err != nil {
			return 0, fmt.Errorf("memimage: reading a snappy chunk header at %#x: %w", p, err)
		}
		typ := b[0]
		blen := int64(b[1]) | int64(b[2])<<8 | int64(b[3])<<16
		if blen > f.size-p-chunkHeaderSize {
			return 0, bad(p, true, "snappy chunk of %d bytes runs past the end of the file (the range has %d of its %d bytes)", blen, got, want)
		}
		switch {
		case typ == chunkStreamID:
			if blen != int64(len(streamID)) || string(b[chunkHeaderSize:chunkHeaderSize+len(streamID)]) != streamID {
				return 0, bad(p, false, "bad snappy stream identifier")
			}
			sawID = true
		case !sawID:
			return 0, bad(p, false, "the block's snappy stream does not start with the stream identifier (chunk type %#x)", typ)
		case typ == chunkCompressed || typ == chunkUncompressed:
			if blen < chunkCRCSize+1 {
				return 0, bad(p, false, "snappy chunk of %d bytes is too short", blen)
			}
			body := blen - chunkCRCSize
			var size uint64
			kind := storedChunk
			if typ == chunkUncompressed {
				size = uint64(body)
			} else {
				kind = compressedChunk
				v, k := binary.Uvarint(b[chunkHeaderSize+chunkCRCSize : n])
				if k <= 0 || int64(k) > body {
					return 0, bad(p, false, "snappy chunk without a valid length")
				}
				if body > maxChunkBody {
					return 0, bad(p, false, "compressed snappy chunk of %d bytes, more than %d can hold", body, maxChunkBody)
				}
				size = v
			}
			if size > maxChunkData {
				return 0, bad(p, false, "snappy chunk declares %d bytes, more than the %d the format allows", size, maxChunkData)
			}
			if size > want-got {
				return 0, bad(p, false, "the block decompresses to more than the range's %d bytes (%d after this chunk)", want, got+size)
			}
			if size > 0 {
				f.pieces = append(f.pieces, piece{
					start: start + got, last: start + got + size - 1,
					off: p + chunkHeaderSize + chunkCRCSize, blen: uint32(body),
					crc: binary.LittleEndian.Uint32(b[chunkHeaderSize:]), kind: kind, rng: int32(i),
				})
			}
			got += size
		case typ <= chunkLastUnskippable:
			return 0, bad(p, false, "reserved unskippable snappy chunk type %#x", typ)
		}
		p += chunkHeaderSize + blen
	}
	if f.size-p < avmlTrailerSize {
		return 0, bad(p, true, "no compressed-size trailer after the block's snappy stream")
	}
	var t [avmlTrailerSize]byte
	if _, err := f.r.ReadAt(t[:], p); err != nil {
		return 0, fmt.Errorf("memimage: reading a block trailer at %#x: %w", p, err)
	}
	if v := binary.LittleEndian.Uint64(t[:]); v != uint64(p-off) {
		return 0, bad(p, false, "the trailer says the compressed block takes %d bytes, its snappy stream takes %d", v, p-off)
	}
	return p + avmlTrailerSize, nil
}

// checkOverlaps refuses ranges (in file order) that overlap; off gives the
// file offset to report for a range.
func checkOverlaps(order []Range, off func(int) int64) error {
	idx := make([]int, len(order))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case order[a].Start < order[b].Start:
			return -1
		case order[a].Start > order[b].Start:
			return 1
		}
		return a - b
	})
	for k := 1; k < len(idx); k++ {
		a, b := order[idx[k-1]], order[idx[k]]
		if b.Start <= a.Last {
			j := max(idx[k-1], idx[k])
			o := order[j]
			e := rangeErr(off(j), j, o.Start, o.Last, "range overlaps range %d [%#x-%#x]", min(idx[k-1], idx[k]), order[min(idx[k-1], idx[k])].Start, order[min(idx[k-1], idx[k])].Last)
			e.kind = ErrOverlap
			return e
		}
	}
	return nil
}

// finish sorts the ranges and pieces by address.
func (f *File) finish(order []Range) {
	f.order = order
	f.ranges = slices.Clone(order)
	slices.SortFunc(f.ranges, func(a, b Range) int {
		if a.Start < b.Start {
			return -1
		}
		return 1
	})
	slices.SortStableFunc(f.pieces, func(a, b piece) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	f.starts = make([]uint64, len(f.pieces))
	for i, p := range f.pieces {
		f.starts[i] = p.start
	}
}

// Format returns the image's format: LiME, AVML or Raw.
func (f *File) Format() Format { return f.format }

// ByteOrder returns the byte order of a LiME file's headers (that of the
// machine the module ran on), little-endian for AVML, nil for a raw image.
func (f *File) ByteOrder() binary.ByteOrder { return f.bo }

// Ranges returns the physical ranges the image holds, in ascending order.
// The slice is the File's own.
func (f *File) Ranges() []Range { return f.ranges }

// Close closes the file Open opened; for a File from NewFile or NewRaw it
// does nothing.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	return c.Close()
}

// Physical returns a reader of the physical memory the image holds. A read
// of an address in no range fails with a *memory.FaultError wrapping
// memory.ErrNotSaved.
func (f *File) Physical() memory.Reader { return memory.ReaderFunc(f.readAt) }

func (f *File) readAt(p []byte, addr uint64) (int, error) {
	done := 0
	for done < len(p) {
		a := addr + uint64(done)
		if done > 0 && a == 0 {
			return done, memory.Fault(a, memory.SpacePhysical, "read past the end of the address space", memory.ErrCorrupt)
		}
		i, found := slices.BinarySearch(f.starts, a)
		if !found {
			i--
		}
		if i < 0 || a > f.pieces[i].last {
			return done, memory.Fault(a, memory.SpacePhysical, "", memory.ErrNotSaved)
		}
		pc := &f.pieces[i]
		n := len(p) - done
		if avail := pc.last - a; avail < uint64(n-1) {
			n = int(avail) + 1
		}
		within := a - pc.start
		if pc.kind == plainPiece {
			if _, err := f.r.ReadAt(p[done:done+n], pc.off+int64(within)); err != nil {
				return done, memory.Fault(a, memory.SpacePhysical, fmt.Sprintf("reading file offset %#x", pc.off+int64(within)), err)
			}
		} else {
			if err := f.readChunk(i, p[done:done+n], within); err != nil {
				return done, memory.Fault(a, memory.SpacePhysical, "", err)
			}
		}
		done += n
	}
	return done, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readChunk copies into dst the decompressed data of AVML chunk piece i
// from offset within, decompressing the chunk unless it is cached. The
// copy is made under the lock: the buffer may be reused by the next miss.
func (f *File) readChunk(i int, dst []byte, within uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := f.chunk(i)
	if err != nil {
		return err
	}
	copy(dst, data[within:])
	return nil
}

// chunk returns the decompressed data of chunk piece i. f.mu is held.
func (f *File) chunk(i int) ([]byte, error) {
	f.tick++
	victim := 0
	for k := range f.cache {
		c := &f.cache[k]
		if c.idx == i+1 {
			c.used = f.tick
			return c.data, nil
		}
		if c.used < f.cache[victim].used {
			victim = k
		}
	}
	pc := &f.pieces[i]
	size := int(pc.last - pc.start + 1)
	if cap(f.body) < int(pc.blen) {
		f.body = make([]byte, pc.blen) // at most maxChunkBody: checked at open
	}
	body := f.body[:pc.blen]
	if _, err := f.r.ReadAt(body, pc.off); err != nil {
		return nil, fmt.Errorf("memimage: reading the snappy chunk at %#x: %w", pc.off, err)
	}
	c := &f.cache[victim]
	c.idx = 0 // its buffer is about to be overwritten
	data := c.data[:0]
	if pc.kind == storedChunk {
		data = append(data, body...)
	} else {
		if cap(data) < size {
			data = make([]byte, size)
		}
		var err error
		data, err = snappy.Decode(data[:size], body)
		if err != nil || len(data) != size {
			r := f.pieces[i]
			return nil, f.chunkErr(r, "snappy chunk does not decompress to its %d bytes: %v", size, err)
		}
	}
	if got := maskedCRC(data); got != pc.crc {
		return nil, f.chunkErr(*pc, "snappy chunk CRC %#08x, its data's is %#08x", pc.crc, got)
	}
	c.idx, c.used, c.data = i+1, f.tick, data
	return data, nil
}

func (f *File) chunkErr(pc piece, format string, args ...any) error {
	r := f.order[pc.rng]
	e := rangeErr(pc.off-chunkHeaderSize-chunkCRCSize, int(pc.rng), r.Start, r.Last, format, args...)
	e.kind = ErrBadBlock
	return e
}

// maskedCRC is the snappy framing format's checksum of data.
func maskedCRC(data []byte) uint32 {
	c := crc32.Checksum(data, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}
