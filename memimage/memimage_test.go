package memimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// testMemory is physical memory of three ranges: text-like bytes at
// 0x1000, random bytes at 0x10000 (over 64 KiB, so AVML needs several
// chunks, some stored uncompressed) and a range just after it.
func testMemory(t testing.TB) (*testutil.SparseMemory, []testutil.PhysRange) {
	t.Helper()
	m := testutil.NewSparseMemory()
	m.Space = "physical"
	rng := rand.New(rand.NewPCG(1, 2))
	m.Write(0x1000, bytes.Repeat([]byte("kallsyms_token_table\x00"), 400)[:0x2000])
	random := make([]byte, 0x18000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	m.Write(0x10000, random)
	m.Write(0x28000, bytes.Repeat([]byte{0x5a}, 0x1000))
	return m, []testutil.PhysRange{{Start: 0x1000, Last: 0x2fff}, {Start: 0x10000, Last: 0x27fff}, {Start: 0x28000, Last: 0x28fff}}
}

func lime(t testing.TB, m memory.Reader, rs []testutil.PhysRange, bo binary.ByteOrder) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, testutil.WriteLiME(&b, m, rs, bo))
	return b.Bytes()
}

func avml(t testing.TB, m memory.Reader, rs []testutil.PhysRange) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, testutil.WriteAVML(&b, m, rs))
	return b.Bytes()
}

// checkSame reads every range of want through f, in odd-sized pieces that
// cross page, chunk and range boundaries, and the gaps around them.
func checkSame(t *testing.T, f *File, want memory.Reader, rs []testutil.PhysRange) {
	t.Helper()
	for _, r := range rs {
		size := int(r.Last - r.Start + 1)
		exp := make([]byte, size)
		require.NoError(t, memory.ReadFull(want, exp, r.Start))
		for _, step := range []int{size, 4096, 1000, 65536 + 3} {
			got := make([]byte, size)
			for off := 0; off < size; off += step {
				n := min(step, size-off)
				require.NoError(t, memory.ReadFull(f.Physical(), got[off:off+n], r.Start+uint64(off)), "range %#x step %d off %#x", r.Start, step, off)
			}
			require.True(t, bytes.Equal(exp, got), "range %#x step %d", r.Start, step)
		}
		var b [16]byte
		n, err := f.Physical().ReadAt(b[:], r.Last-7)
		if r.Last+1 != 0x28000 { // 0x27fff is followed by the next range
			assert.Equal(t, 8, n)
			var fe *memory.FaultError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, r.Last+1, fe.Addr)
			assert.ErrorIs(t, err, memory.ErrNotSaved)
		} else {
			assert.Equal(t, 16, n)
			assert.NoError(t, err)
		}
	}
	_, err := f.Physical().ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
}

func TestLiME(t *testing.T) {
	m, rs := testMemory(t)
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(bo.String(), func(t *testing.T) {
			img := lime(t, m, rs, bo)
			require.True(t, Probe(bytes.NewReader(img)))
			f, err := NewFile(bytes.NewReader(img), int64(len(img)))
			require.NoError(t, err)
			assert.Equal(t, LiME, f.Format())
			assert.Equal(t, bo, f.ByteOrder())
			assert.Equal(t, []Range{{Start: 0x1000, Last: 0x2fff}, {Start: 0x10000, Last: 0x27fff}, {Start: 0x28000, Last: 0x28fff}}, f.Ranges())
			checkSame(t, f, m, rs)
		})
	}
	t.Run("out of order", func(t *testing.T) {
		rev := []testutil.PhysRange{rs[2], rs[0], rs[1]}
		img := lime(t, m, rev, binary.LittleEndian)
		f, err := NewFile(bytes.NewReader(img), int64(len(img)))
		require.NoError(t, err)
		assert.Equal(t, Range{Start: 0x1000, Last: 0x2fff}, f.Ranges()[0])
		checkSame(t, f, m, rs)
	})
}

func TestAVML(t *testing.T) {
	m, rs := testMemory(t)
	img := avml(t, m, rs)
	require.True(t, Probe(bytes.NewReader(img)))
	f, err := NewFile(bytes.NewReader(img), int64(len(img)))
	require.NoError(t, err)
	assert.Equal(t, AVML, f.Format())
	assert.Greater(t, len(f.pieces), 3, "the random range needs several chunks")
	assert.Less(t, len(img), 0x18000+0x3000+0x1000, "the text range compresses")
	checkSame(t, f, m, rs)

	// An all-zero block is left out, as AVML does, and reads as not saved.
	z := testutil.NewSparseMemory()
	z.Write(0x1000, make([]byte, 0x1000))
	z.Write(0x2000, []byte{1})
	var b bytes.Buffer
	require.NoError(t, testutil.WriteAVML(&b, z, []testutil.PhysRange{{Start: 0x1000, Last: 0x1fff}, {Start: 0x2000, Last: 0x2fff}}))
	f, err = NewFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	require.NoError(t, err)
	assert.Equal(t, []Range{{Start: 0x2000, Last: 0x2fff}}, f.Ranges())
}

// avmlChunks builds an AVML block by hand: header, stream identifier, the
// given chunks (type, body) and a trailer stating trailer bytes (-1: the
// true length).
func avmlChunks(start, last uint64, trailer int64, chunks ...[]byte) []byte {
	stream := []byte{0xff, 6, 0, 0, 's', 'N', 'a', 'P', 'p', 'Y'}
	for _, c := range chunks {
		stream = append(stream, c...)
	}
	if trailer < 0 {
		trailer = int64(len(stream))
	}
	out := testutil.LiMEHeader(binary.LittleEndian, avmlMagic, avmlVersion, start, last)
	out = append(out, stream...)
	return binary.LittleEndian.AppendUint64(out, uint64(trailer))
}

// storedChunkBytes is an uncompressed chunk of data with its CRC.
func storedChunkBytes(data []byte) []byte {
	n := len(data) + 4
	c := []byte{chunkUncompressed, byte(n), byte(n >> 8), byte(n >> 16)}
	c = binary.LittleEndian.AppendUint32(c, maskedCRC(data))
	return append(c, data...)
}

func TestHostile(t *testing.T) {
	m, rs := testMemory(t)
	good := lime(t, m, rs[:2], binary.LittleEndian)
	hdr := func(magic, version uint32, s, e uint64) []byte {
		return testutil.LiMEHeader(binary.LittleEndian, magic, version, s, e)
	}
	page := make([]byte, 0x1000)
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	// Each case names the failure by where it is (the FormatError's
	// fields), its kind (ErrOverlap, ErrBadBlock or neither) and whether
	// the file ended too early; other names the range an overlap hits.
	tests := []struct {
		name  string
		img   []byte
		where where
		kind  error
		eof   bool
		other string
	}{
		{"overlap", cat(hdr(limeMagic, 1, 0x1000, 0x1fff), page, hdr(limeMagic, 1, 0x1800, 0x27ff), page), where{0x1020, 1, 0x1800, 0x27ff}, ErrOverlap, false, "range 0 [0x1000-0x1fff]"},
		{"overlap out of order", cat(hdr(limeMagic, 1, 0x1800, 0x27ff), page, hdr(limeMagic, 1, 0x1000, 0x1fff), page), where{0x1020, 1, 0x1000, 0x1fff}, ErrOverlap, false, "range 0 [0x1800-0x27ff]"},
		{"backwards", cat(hdr(limeMagic, 1, 0x2000, 0x1000), page), where{0, 0, 0x2000, 0x1000}, nil, false, ""},
		{"past end", cat(hdr(limeMagic, 1, 0x1000, 0x1fff), page[:0x800]), where{0, 0, 0x1000, 0x1fff}, nil, true, ""},
		{"huge", cat(hdr(limeMagic, 1, 0, 1<<62)), where{0, 0, 0, 1 << 62}, nil, true, ""},
		{"whole space", cat(hdr(limeMagic, 1, 0, ^uint64(0))), where{0, 0, 0, ^uint64(0)}, nil, false, ""},
		{"version", cat(hdr(limeMagic, 2, 0x1000, 0x1fff), page), where{0, 0, 0x1000, 0x1fff}, nil, false, ""},
		{"magic change", cat(good, hdr(avmlMagic, 2, 0x50000, 0x50fff), page), where{int64(len(good)), -1, 0, 0}, nil, false, ""},
		{"trailing bytes", cat(good, []byte("junk")), where{int64(len(good)), -1, 0, 0}, nil, true, ""},
		{"avml version", cat(hdr(avmlMagic, 1, 0x1000, 0x1fff), page), where{0, 0, 0x1000, 0x1fff}, nil, false, ""},
		// Offsets in a block: its header (32 bytes), the stream
		// identifier chunk (10), the data chunk (4+4+0x1000), the trailer.
		{"avml trailer lies", avmlChunks(0x1000, 0x1fff, 99, storedChunkBytes(page)), where{0x1032, 0, 0x1000, 0x1fff}, ErrBadBlock, false, ""},
		{"avml more than declared", avmlChunks(0x1000, 0x17ff, -1, storedChunkBytes(page)), where{0x2a, 0, 0x1000, 0x17ff}, ErrBadBlock, false, ""},
		{"avml less than declared", avmlChunks(0x1000, 0x2fff, -1, storedChunkBytes(page)), where{0x1032, 0, 0x1000, 0x2fff}, ErrBadBlock, true, ""},
		{"avml no trailer", avmlChunks(0x1000, 0x1fff, -1, storedChunkBytes(page))[:32+10+4+4+0x1000], where{0x1032, 0, 0x1000, 0x1fff}, ErrBadBlock, true, ""},
		{"avml chunk past end", avmlChunks(0x1000, 0x1fff, -1, storedChunkBytes(page))[:32+10+100], where{0x2a, 0, 0x1000, 0x1fff}, ErrBadBlock, true, ""},
		{"avml no stream id", cat(hdr(avmlMagic, 2, 0x1000, 0x1fff), storedChunkBytes(page)), where{0x20, 0, 0x1000, 0x1fff}, ErrBadBlock, false, ""},
		{"avml reserved chunk", avmlChunks(0x1000, 0x1fff, -1, []byte{0x02, 1, 0, 0, 0}), where{0x2a, 0, 0x1000, 0x1fff}, ErrBadBlock, false, ""},
		{"avml chunk too big", avmlChunks(0x1000, 0x11fff, -1, storedChunkBytes(make([]byte, 0x10001))), where{0x2a, 0, 0x1000, 0x11fff}, ErrBadBlock, false, ""},
		{"avml compressed too long", avmlChunks(0x1000, 0x1fff, -1, []byte{0x00, 0xff, 0xff, 0xf0, 0, 0, 0, 0, 0x80, 0x20}, make([]byte, 0xf0ffff)), where{0x2a, 0, 0x1000, 0x1fff}, ErrBadBlock, false, ""},
		{"avml compressed lies", avmlChunks(0x1000, 0x1fff, -1, []byte{0x00, 9, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}), where{0x2a, 0, 0x1000, 0x1fff}, ErrBadBlock, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFile(bytes.NewReader(tt.img), int64(len(tt.img)))
			require.Error(t, err)
			assert.Nil(t, f)
			checkFormatError(t, err, tt.where, tt.kind, tt.eof, tt.other)
		})
	}
	t.Run("unrecognized", func(t *testing.T) {
		for _, img := range [][]byte{nil, []byte("EMi"), []byte("\x7fELF\x02\x01\x01\x00")} {
			_, err := NewFile(bytes.NewReader(img), int64(len(img)))
			assert.ErrorIs(t, err, ErrUnrecognizedFormat)
			assert.False(t, Probe(bytes.NewReader(img)))
		}
	})
}

// TestAVMLBadChunks: chunks that index fine but do not decode fail the
// read that touches them, naming the range, and leave the rest readable.
func TestAVMLBadChunks(t *testing.T) {
	page := bytes.Repeat([]byte("abcd"), 0x400)
	good := storedChunkBytes(page)
	badCRC := storedChunkBytes(page)
	badCRC[4] ^= 1
	comp := snappyChunk(t, page)
	corrupt := slicesClone(comp)
	corrupt[len(corrupt)-1] ^= 0xff
	corrupt[len(corrupt)-3] ^= 0xff
	img := bytes.Join([][]byte{
		avmlChunks(0x1000, 0x1fff, -1, good),
		avmlChunks(0x2000, 0x2fff, -1, badCRC),
		avmlChunks(0x3000, 0x3fff, -1, comp),
		avmlChunks(0x4000, 0x4fff, -1, corrupt),
	}, nil)
	f, err := NewFile(bytes.NewReader(img), int64(len(img)))
	require.NoError(t, err)
	var b [16]byte
	for _, a := range []uint64{0x1000, 0x3ff0} {
		require.NoError(t, memory.ReadFull(f.Physical(), b[:], a))
		assert.Equal(t, page[a&0xfff:][:16], b[:])
	}
	// A stored chunk can only fail its CRC; the compressed one fails to
	// decompress or its CRC. Each names its chunk's offset and range.
	// A chunk's offset: its block's, past the block header (32 bytes)
	// and the stream identifier chunk (10).
	blk := int64(len(avmlChunks(0x1000, 0x1fff, -1, good)))
	blk2 := int64(len(avmlChunks(0x3000, 0x3fff, -1, comp)))
	_, err = f.Physical().ReadAt(b[:], 0x2000)
	checkFormatError(t, err, where{blk + 32 + 10, 1, 0x2000, 0x2fff}, ErrBadBlock, false, "")
	_, err = f.Physical().ReadAt(b[:], 0x4000)
	checkFormatError(t, err, where{2*blk + blk2 + 32 + 10, 3, 0x4000, 0x4fff}, ErrBadBlock, false, "")
	require.NoError(t, memory.ReadFull(f.Physical(), b[:], 0x1ff0), "a failed chunk leaves the cache sound")
	assert.Equal(t, page[0xff0:], b[:])
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// snappyChunk is a compressed chunk of data as the framing format stores it.
func snappyChunk(t *testing.T, data []byte) []byte {
	t.Helper()
	blk := avmlChunksFromWriter(t, data)
	return blk
}

// avmlChunksFromWriter takes the first data chunk testutil.AVMLBlock
// writes for data (one chunk: data is at most 64 KiB).
func avmlChunksFromWriter(t *testing.T, data []byte) []byte {
	t.Helper()
	blk, err := testutil.AVMLBlock(0, uint64(len(data)-1), data)
	require.NoError(t, err)
	stream := blk[32+10 : len(blk)-8]
	require.Equal(t, byte(chunkCompressed), stream[0], "a compressible page makes a compressed chunk")
	return stream
}

func TestRaw(t *testing.T) {
	img := make([]byte, 0x3000)
	for i := range img {
		img[i] = byte(i / 0x1000)
	}
	r := bytes.NewReader(img)
	f, err := NewRaw(r, int64(len(img)), []RawRange{{Start: 0x40000000}})
	require.NoError(t, err)
	assert.Equal(t, Raw, f.Format())
	assert.Equal(t, []Range{{Start: 0x40000000, Last: 0x40002fff}}, f.Ranges())
	var b [2]byte
	require.NoError(t, memory.ReadFull(f.Physical(), b[:], 0x40000fff))
	assert.Equal(t, []byte{0, 1}, b[:])

	f, err = NewRaw(r, int64(len(img)), []RawRange{{Start: 0x100000, Size: 0x1000}, {Start: 0, Size: 0x1000}, {Start: 0x200000}})
	require.NoError(t, err)
	assert.Equal(t, []Range{{0, 0xfff}, {Start: 0x100000, Last: 0x100fff}, {Start: 0x200000, Last: 0x200fff}}, f.Ranges())
	require.NoError(t, memory.ReadFull(f.Physical(), b[:1], 0))
	assert.Equal(t, byte(1), b[0])
	require.NoError(t, memory.ReadFull(f.Physical(), b[:1], 0x200000))
	assert.Equal(t, byte(2), b[0])
	_, err = f.Physical().ReadAt(b[:], 0xfff)
	assert.ErrorIs(t, err, memory.ErrNotSaved)

	bad := []struct {
		name   string
		layout []RawRange
		where  where
		kind   error
		eof    bool
		mine   bool // the layout's own mistake
		other  string
	}{
		// The layout's own mistakes (ErrBadLayout, not corrupt data).
		{"empty", nil, where{0, -1, 0, 0}, nil, false, true, ""},
		{"rest not last", []RawRange{{Start: 0}, {Start: 0x10000}}, where{0, 0, 0, 0}, nil, false, true, "only the last"},
		{"overlap", []RawRange{{Start: 0, Size: 0x2000}, {Start: 0x1000, Size: 0x1000}}, where{0x2000, 1, 0x1000, 0x1fff}, ErrOverlap, false, true, "range 0 [0x0-0x1fff]"},
		{"overlaps the rest", []RawRange{{Start: 0, Size: 0x1000}, {Start: 0}}, where{0x1000, 1, 0, 0x1fff}, ErrOverlap, false, true, "range 0 [0x0-0xfff]"},
		{"wraps", []RawRange{{Start: ^uint64(0) - 0xff, Size: 0x1000}}, where{0, 0, ^uint64(0) - 0xff, 0}, nil, false, true, "past the end of the address space"},
		{"rest wraps", []RawRange{{Start: ^uint64(0) - 0xff}}, where{0, 0, ^uint64(0) - 0xff, 0}, nil, false, true, "past the end of the address space"},
		// What the file lacks.
		{"short", []RawRange{{Start: 0, Size: 0x4000}}, where{0, 0, 0, 0x3fff}, nil, true, false, ""},
		{"short second", []RawRange{{Start: 0, Size: 0x2000}, {Start: 0x10000, Size: 0x2000}}, where{0x2000, 1, 0x10000, 0x11fff}, nil, true, false, ""},
		{"nothing left", []RawRange{{Start: 0, Size: 0x3000}, {Start: 0x10000}}, where{0x3000, 1, 0x10000, 0}, nil, true, false, "no bytes left"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewRaw(r, int64(len(img)), tt.layout)
			require.Error(t, err)
			assert.Nil(t, f)
			checkError(t, err, tt.where, tt.kind, tt.eof, tt.mine, tt.other)
			if tt.mine {
				// ParseRawLayout rejects the layout before any file, the
				// rest of the file aside, whose size it cannot know.
				if tt.name == "rest wraps" || tt.name == "overlaps the rest" || tt.layout == nil {
					return
				}
				_, err := ParseRawLayout(layoutString(tt.layout))
				assert.ErrorIs(t, err, ErrBadLayout)
				assert.NotErrorIs(t, err, memory.ErrCorrupt)
			}
		})
	}
}

// where is the place a *FormatError names: its Off, Range, Start and
// Last.
type where struct {
	off         int64
	rng         int
	start, last uint64
}

// checkFormatError checks that err is a *FormatError at w, matching
// memory.ErrCorrupt, kind (ErrOverlap, ErrBadBlock, or neither when nil)
// and io.ErrUnexpectedEOF exactly when eof, whose one-line message names
// the offset, the range and other.
func checkFormatError(t *testing.T, err error, w where, kind error, eof bool, other string) {
	t.Helper()
	checkError(t, err, w, kind, eof, false, other)
}

// checkError is checkFormatError for an error that is a raw layout's
// mistake (ErrBadLayout, not memory.ErrCorrupt) when layout.
func checkError(t *testing.T, err error, w where, kind error, eof, layout bool, other string) {
	t.Helper()
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, w, where{fe.Off, fe.Range, fe.Start, fe.Last})
	assert.Equal(t, !layout, errors.Is(err, memory.ErrCorrupt), "corrupt")
	assert.Equal(t, layout, errors.Is(err, ErrBadLayout), "bad layout")
	assert.Equal(t, eof, errors.Is(err, io.ErrUnexpectedEOF), "eof")
	for _, k := range []error{ErrOverlap, ErrBadBlock} {
		assert.Equal(t, k == kind, errors.Is(err, k), "kind %v", k)
	}
	names := []string{fmt.Sprintf("at offset %#x: ", w.off)}
	switch {
	case w.rng >= 0 && fe.noLast:
		assert.Zero(t, w.last, "a range without a last byte has Last 0")
		names = append(names, fmt.Sprintf("range %d at %#x: ", w.rng, w.start))
	case w.rng >= 0:
		names = append(names, fmt.Sprintf("range %d [%#x-%#x]: ", w.rng, w.start, w.last))
	}
	if other != "" {
		names = append(names, other)
	}
	errshape.Require(t, err, names...)
}

// layoutString writes l as ParseRawLayout reads it.
func layoutString(l []RawRange) string {
	var parts []string
	for _, r := range l {
		p := fmt.Sprintf("%#x", r.Start)
		if r.Size != 0 {
			p += fmt.Sprintf(":%#x", r.Size)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}

func TestParseRawLayout(t *testing.T) {
	good := map[string][]RawRange{
		"0x0":                 {{}},
		"0x40000000":          {{Start: 0x40000000}},
		"0:3G,0x100000000":    {{Start: 0, Size: 3 << 30}, {Start: 1 << 32}},
		"0x1000:0x2000, 4096": {{Start: 0x1000, Size: 0x2000}, {Start: 4096}},
	}
	for s, want := range good {
		got, err := ParseRawLayout(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "x", "0:", "0:0", "0:1Q", "0:99999999999T", "0,,1", "-1"} {
		_, err := ParseRawLayout(s)
		assert.Error(t, err, s)
	}
}
