package diskdump

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// builder writes synthetic kdump-compressed files the way makedumpfile
// lays them out: header, sub-header + notes, both bitmaps, descriptors,
// page data (an all-zero page shared by every zero pfn first).
type builder struct {
	version    int
	bs         int
	bo         binary.ByteOrder
	layout     *headerLayout
	sub        *subLayout
	machine    string
	maxMapnr   uint64
	pages      map[uint64][]byte // saved pages by dump pfn
	codec      func(pfn uint64) uint32
	status     uint32
	vmcoreinfo []byte
	notes      []byte
	eraseinfo  []byte
	physBase   uint64
	split      bool
	start, end uint64 // split range
	noFirstBM  bool   // write a single bitmap (old format)
	zeroDesc   [2]uint32
	zeroAt     int64             // file offset of the shared zero page, -1 if none
	stored     map[uint64]uint32 // codec flags each written descriptor got
}

func newBuilder(version int) *builder {
	return &builder{version: version, bs: 4096, bo: binary.LittleEndian, layout: &layout64, sub: &sub64,
		machine: "x86_64", maxMapnr: 1024, pages: map[uint64][]byte{}, codec: func(uint64) uint32 { return 0 }}
}

// fill adds pages with recognisable, compressible content for pfns.
func (b *builder) fill(pfns ...uint64) *builder {
	for _, pfn := range pfns {
		b.pages[pfn] = pageContent(pfn, b.bs)
	}
	return b
}

func pageContent(pfn uint64, bs int) []byte {
	p := make([]byte, bs)
	if pfn%7 == 3 {
		return p // zero page
	}
	r := rand.New(rand.NewPCG(pfn, 42))
	for i := 0; i < bs; i += 8 {
		v := pfn<<32 | uint64(i/64%4)
		if i%64 == 0 || pfn%5 == 1 {
			v = r.Uint64() // pfn%5 == 1: incompressible, stored raw
		}
		binary.LittleEndian.PutUint64(p[i:], v)
	}
	return p
}

var (
	zlibWriters sync.Pool // of *zlib.Writer
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

// compressedPages memoizes compressPage: the tests build many dumps of
// the same page contents (pageContent of the same pfns) with each codec.
var compressedPages sync.Map // compressedKey → []byte

type compressedKey struct {
	codec uint32
	sum   [sha256.Size]byte
}

// compressPage returns p compressed with codec (p itself for raw); the
// result is the caller's to modify.
func compressPage(t testing.TB, codec uint32, p []byte) []byte {
	switch codec {
	case StatusZlib, StatusSnappy, StatusZstd, StatusLZO:
	default:
		return p // raw
	}
	key := compressedKey{codec, sha256.Sum256(p)}
	if c, ok := compressedPages.Load(key); ok {
		return bytes.Clone(c.([]byte))
	}
	c := compressPageOnce(codec, p)
	compressedPages.Store(key, c)
	return bytes.Clone(c)
}

func compressPageOnce(codec uint32, p []byte) []byte {
	switch codec {
	case StatusZlib:
		// A zlib writer allocates its compressor state: reset one
		// instead of making one per page.
		var buf bytes.Buffer
		w, _ := zlibWriters.Get().(*zlib.Writer)
		if w == nil {
			w = zlib.NewWriter(&buf)
		} else {
			w.Reset(&buf)
		}
		w.Write(p)
		w.Close()
		zlibWriters.Put(w)
		return buf.Bytes()
	case StatusSnappy:
		return snappy.Encode(nil, p)
	case StatusZstd:
		zstdEncOnce.Do(func() {
			zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		})
		return zstdEnc.EncodeAll(p, nil)
	case StatusLZO:
		return lzoEncode(p)
	}
	return p
}

// lzoEncode is a small greedy LZO1X compressor: literal runs and M3
// matches (distance up to 16 KiB, length 3 and up), with 1..3 trailing
// literals folded into a match's state bits, and the M4 end marker. It
// exercises the decoder's literal, match, state and end paths.
func lzoEncode(p []byte) []byte {
	var out []byte
	// Sized once: growing the map was most of the encoding's time.
	last := make(map[uint32]int, len(p))
	prevS := -1 // index in out of the last match's low distance byte
	emitLits := func(lits []byte) {
		n := len(lits)
		if n == 0 {
			return
		}
		switch {
		case prevS < 0 && n <= 238:
			out = append(out, byte(17+n))
		case prevS >= 0 && n <= 3:
			out[prevS] |= byte(n)
		case n <= 18:
			out = append(out, byte(n-3))
		default:
			out = append(out, 0)
			rest := n - 18
			for rest > 255 {
				out = append(out, 0)
				rest -= 255
			}
			out = append(out, byte(rest))
		}
		out = append(out, lits...)
	}
	litStart := 0
	for i := 0; i+3 <= len(p); {
		key := uint32(p[i]) | uint32(p[i+1])<<8 | uint32(p[i+2])<<16
		cand, ok := last[key]
		last[key] = i
		if !ok || i-cand > 16384 || i == 0 {
			i++
			continue
		}
		m := 0
		for i+m < len(p) && p[cand+m] == p[i+m] {
			m++
		}
		if m < 3 {
			i++
			continue
		}
		emitLits(p[litStart:i])
		if m-2 <= 31 {
			out = append(out, byte(0x20|(m-2)))
		} else {
			out = append(out, 0x20)
			rest := m - 33
			for rest > 255 {
				out = append(out, 0)
				rest -= 255
			}
			out = append(out, byte(rest))
		}
		d := i - cand - 1
		out = append(out, byte(d<<2), byte(d>>6))
		prevS = len(out) - 2
		i += m
		litStart = i
	}
	emitLits(p[litStart:])
	return append(out, 0x11, 0, 0) // M4 end of stream
}

func (b *builder) put16(buf []byte, off int, v uint64, size int) {
	switch size {
	case 4:
		b.bo.PutUint32(buf[off:], uint32(v))
	case 8:
		b.bo.PutUint64(buf[off:], v)
	}
}

// build returns the file bytes.
func (b *builder) build(t testing.TB) []byte {
	t.Helper()
	bs := b.bs
	bmBytes := (b.maxMapnr + 7) / 8
	bmBlocks := (bmBytes + uint64(bs) - 1) / uint64(bs)
	if bmBlocks == 0 {
		bmBlocks = 1
	}
	nbm := uint64(2)
	if b.noFirstBM {
		nbm = 1
	}
	// Sub-header blocks: sub-header, notes, vmcoreinfo, eraseinfo.
	extra := b.sub.Size + len(b.notes) + len(b.vmcoreinfo) + len(b.eraseinfo)
	subBlocks := (extra + bs - 1) / bs
	if b.version == 0 {
		subBlocks = 1
	}
	hdr := make([]byte, bs*(1+subBlocks))
	copy(hdr, sigKdump)
	b.bo.PutUint32(hdr[offVersion:], uint32(b.version))
	copy(hdr[offUtsname:], "Linux")
	copy(hdr[offUtsname+utsFieldLen:], "testhost")
	copy(hdr[offUtsname+2*utsFieldLen:], "6.1.0-test")
	copy(hdr[offUtsname+3*utsFieldLen:], "#1 SMP")
	copy(hdr[offMachine:], b.machine)
	l := b.layout
	b.put16(hdr, l.Timestamp, 1700000000, l.PtrSize)
	b.put16(hdr, l.Timestamp+l.PtrSize, 250000, l.PtrSize)
	b.bo.PutUint32(hdr[l.Status:], b.status)
	b.bo.PutUint32(hdr[l.BlockSize:], uint32(bs))
	b.bo.PutUint32(hdr[l.SubHdrSize:], uint32(subBlocks))
	b.bo.PutUint32(hdr[l.BitmapBlocks:], uint32(nbm*bmBlocks))
	b.bo.PutUint32(hdr[l.MaxMapnr:], uint32(b.maxMapnr))
	b.bo.PutUint32(hdr[l.NrCPUs:], 2)

	s := b.sub
	sh := hdr[bs:]
	b.put16(sh, s.PhysBase, b.physBase, s.Long)
	b.bo.PutUint32(sh[s.DumpLevel:], 31)
	start, end := uint64(0), b.maxMapnr
	if b.split {
		start, end = b.start, b.end
		b.bo.PutUint32(sh[s.Split:], 1)
		b.put16(sh, s.StartPFN, start, s.Long)
		b.put16(sh, s.EndPFN, end, s.Long)
		b.bo.PutUint64(sh[s.StartPFN64:], start)
		b.bo.PutUint64(sh[s.EndPFN64:], end)
	}
	b.bo.PutUint64(sh[s.MaxMapnr64:], b.maxMapnr)
	pos := bs + s.Size
	if len(b.notes) > 0 {
		copy(hdr[pos:], b.notes)
		b.bo.PutUint64(sh[s.OffNote:], uint64(pos))
		b.put16(sh, s.SizeNote, uint64(len(b.notes)), s.Long)
		pos += len(b.notes)
	}
	if len(b.vmcoreinfo) > 0 {
		copy(hdr[pos:], b.vmcoreinfo)
		b.bo.PutUint64(sh[s.OffVmcoreinfo:], uint64(pos))
		b.put16(sh, s.SizeVmcoreinfo, uint64(len(b.vmcoreinfo)), s.Long)
		pos += len(b.vmcoreinfo)
	}
	if len(b.eraseinfo) > 0 {
		copy(hdr[pos:], b.eraseinfo)
		b.bo.PutUint64(sh[s.OffEraseinfo:], uint64(pos))
		b.put16(sh, s.SizeEraseinfo, uint64(len(b.eraseinfo)), s.Long)
	}
	// Clear fields a version does not have (they would be garbage to a
	// reader of that version, not zero, but zero is the honest default).
	if b.version < 6 {
		clear(sh[s.StartPFN64:s.Size])
	}
	if b.version < 5 {
		clear(sh[s.OffEraseinfo:s.StartPFN64])
	}
	if b.version < 4 {
		clear(sh[s.OffNote:s.OffEraseinfo])
	}
	if b.version < 3 {
		clear(sh[s.OffVmcoreinfo:s.OffNote])
	}
	if b.version < 2 {
		clear(sh[s.Split:s.OffVmcoreinfo])
	}

	bm := make([]byte, nbm*bmBlocks*uint64(bs))
	second := bm[(nbm-1)*bmBlocks*uint64(bs):]
	pfns := make([]uint64, 0, len(b.pages))
	for pfn := range b.pages {
		pfns = append(pfns, pfn)
	}
	slices.Sort(pfns)
	for _, pfn := range pfns {
		bm[pfn/8] |= 1 << (pfn % 8)
		second[pfn/8] |= 1 << (pfn % 8)
	}
	var inRange []uint64
	for _, pfn := range pfns {
		if pfn >= start && pfn < end {
			inRange = append(inRange, pfn)
		}
	}
	descOff := len(hdr) + len(bm)
	dataOff := descOff + len(inRange)*pageDescSize
	desc := make([]byte, len(inRange)*pageDescSize)
	var data []byte
	zero := make([]byte, bs)
	b.stored = map[uint64]uint32{}
	zeroOff := int64(-1)
	for i, pfn := range inRange {
		p := b.pages[pfn]
		var off int64
		var stored []byte
		flags := b.codec(pfn)
		if flags != 0 {
			stored = compressPage(t, flags, p)
			if len(stored) >= bs {
				stored, flags = p, 0
			}
		} else {
			stored = p
		}
		if bytes.Equal(p, zero) {
			if zeroOff < 0 {
				zeroOff = int64(dataOff + len(data))
				data = append(data, stored...)
				b.zeroDesc = [2]uint32{uint32(len(stored)), flags}
			}
			off = zeroOff
			b.bo.PutUint64(desc[i*24:], uint64(off))
			b.bo.PutUint32(desc[i*24+8:], b.zeroDesc[0])
			b.bo.PutUint32(desc[i*24+12:], b.zeroDesc[1])
			b.stored[pfn] = b.zeroDesc[1]
			continue
		}
		off = int64(dataOff + len(data))
		data = append(data, stored...)
		b.bo.PutUint64(desc[i*24:], uint64(off))
		b.bo.PutUint32(desc[i*24+8:], uint32(len(stored)))
		b.bo.PutUint32(desc[i*24+12:], flags)
		b.stored[pfn] = flags
	}
	b.zeroAt = zeroOff
	out := slices.Concat(hdr, bm, desc, data)
	return out
}

// flatten turns a file into a flattened stream written in chunks of
// chunk bytes, in a shuffled order when shuffle is set, with a garbage
// record that a later one overwrites when overlap is set.
func flatten(file []byte, chunk int, shuffle, overlap bool) []byte {
	out := make([]byte, flatHeaderSize)
	copy(out, sigFlat)
	binary.BigEndian.PutUint64(out[16:], flatTypeHeader)
	binary.BigEndian.PutUint64(out[24:], flatVersion)
	rec := func(off int64, data []byte) {
		var h [16]byte
		binary.BigEndian.PutUint64(h[0:], uint64(off))
		binary.BigEndian.PutUint64(h[8:], uint64(len(data)))
		out = append(out, h[:]...)
		out = append(out, data...)
	}
	type piece struct{ off, end int }
	var ps []piece
	for off := 0; off < len(file); off += chunk {
		ps = append(ps, piece{off, min(off+chunk, len(file))})
	}
	if shuffle {
		r := rand.New(rand.NewPCG(1, 2))
		// Keep the header first, as writers do.
		r.Shuffle(len(ps)-1, func(i, j int) { ps[i+1], ps[j+1] = ps[j+1], ps[i+1] })
	}
	if overlap && len(file) > 3*chunk {
		junk := bytes.Repeat([]byte{0xA5}, chunk+chunk/2)
		rec(int64(chunk/2), junk)
	}
	for _, p := range ps {
		rec(int64(p.off), file[p.off:p.end])
	}
	var end [16]byte
	binary.BigEndian.PutUint64(end[0:], ^uint64(0))
	binary.BigEndian.PutUint64(end[8:], ^uint64(0))
	return append(out, end[:]...)
}
