package diskdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/require"
)

// requireFormatError checks a hostile-input error: corruption, a
// *FormatError at file offset off (-1: any), and a message of one line
// that names that offset.
func requireFormatError(t *testing.T, err error, off int64) *FormatError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, memory.ErrCorrupt)
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	if off >= 0 {
		require.Equal(t, off, fe.Off, "%v", err)
	}
	requireOneLine(t, err)
	return fe
}

// requireOneLine checks the shape of an error message: one line, naming
// where (every offset and address in its tree, in hex; see errshape), a
// FormatError's offset as "offset 0x…".
func requireOneLine(t *testing.T, err error) {
	t.Helper()
	var where []string
	var fe *FormatError
	if errors.As(err, &fe) && fe.Off >= 0 {
		where = append(where, fmt.Sprintf("offset %#x", fe.Off))
	}
	errshape.Require(t, err, where...)
}

func TestHostileHeaders(t *testing.T) {
	good := newBuilder(6).fill(1, 2, 3).build(t)
	le := binary.LittleEndian
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		off    int64 // the FormatError's offset: the field that fails
	}{
		{"truncated-header", func(b []byte) []byte { return b[:100] }, 0},
		{"block-size-not-pow2", func(b []byte) []byte { le.PutUint32(b[428:], 4000); return b }, 428},
		{"block-size-huge", func(b []byte) []byte { le.PutUint32(b[428:], 1<<30); return b }, 428},
		{"bitmap-blocks-huge", func(b []byte) []byte { le.PutUint32(b[436:], 1<<30); return b }, 436},
		{"sub-hdr-negative", func(b []byte) []byte { le.PutUint32(b[432:], 0xffffffff); return b }, 432},
		{"version-negative", func(b []byte) []byte { le.PutUint32(b[8:], 0x80000000); return b }, offVersion},
		{"max-mapnr-too-big", func(b []byte) []byte { le.PutUint64(b[4096+96:], 1<<40); return b }, int64(layout64.MaxMapnr)},
		{"vmcoreinfo-outside", func(b []byte) []byte { le.PutUint64(b[4096+32:], 1<<40); le.PutUint64(b[4096+40:], 5); return b }, 4096 + 32},
		{"descriptors-truncated", func(b []byte) []byte { return b[:4*4096+30] }, -1},
		{"split-range-outside", func(b []byte) []byte {
			le.PutUint32(b[4096+12:], 1)
			le.PutUint64(b[4096+80:], 5000)
			le.PutUint64(b[4096+88:], 6000)
			return b
		}, 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(good))
			d, err := NewDump(bytes.NewReader(b))
			require.Nil(t, d)
			requireFormatError(t, err, tc.off)
		})
	}
}

// pfnsOf returns the saved pfns of b in descriptor order.
func pfnsOf(b *builder) []uint64 {
	return slices.Sorted(maps.Keys(b.pages))
}

func TestHostilePages(t *testing.T) {
	b := newBuilder(6).fill(1, 2, 4, 5, 6)
	b.codec = func(pfn uint64) uint32 { return codecs[pfn%5].flag }
	good := b.build(t)
	le := binary.LittleEndian
	descOff := 4 * 4096
	desc := func(i int) []byte { return good[descOff+i*24 : descOff+i*24+24] }
	_ = desc
	// Descriptor index of pfn: 1->0, 2->1, 4->2, 5->3, 6->4.
	tests := []struct {
		name   string
		pfn    uint64
		mutate func([]byte)
	}{
		{"offset-beyond-file", 2, func(f []byte) { le.PutUint64(f[descOff+1*24:], 1<<40) }},
		{"offset-zero", 2, func(f []byte) { le.PutUint64(f[descOff+1*24:], 0) }},
		{"size-too-big", 2, func(f []byte) { le.PutUint32(f[descOff+1*24+8:], 8192) }},
		{"raw-wrong-size", 5, func(f []byte) {
			le.PutUint32(f[descOff+3*24+8:], 4000)
			le.PutUint32(f[descOff+3*24+12:], 0)
		}},
		{"unknown-flags", 2, func(f []byte) { le.PutUint32(f[descOff+1*24+12:], 0x100) }},
		{"zlib-garbage", 6, func(f []byte) {
			o := le.Uint64(f[descOff+4*24:])
			le.PutUint32(f[descOff+4*24+12:], StatusZlib)
			copy(f[o:], "garbage!")
		}},
		{"lzo-garbage", 2, func(f []byte) {
			o := le.Uint64(f[descOff+1*24:])
			le.PutUint32(f[descOff+1*24+12:], StatusLZO)
			copy(f[o:], "\x00\x00\x00\x00garbage!")
		}},
		{"snappy-garbage", 4, func(f []byte) {
			o := le.Uint64(f[descOff+2*24:])
			le.PutUint32(f[descOff+2*24+12:], StatusSnappy)
			copy(f[o:], "\xff\xff\xff\xff\x0fgarbage")
		}},
		{"zstd-garbage", 5, func(f []byte) {
			o := le.Uint64(f[descOff+3*24:])
			le.PutUint32(f[descOff+3*24+12:], StatusZstd)
			copy(f[o:], "garbage!")
		}},
		{"short-page", 6, func(f []byte) {
			// A valid zstd frame of half a page.
			z := compressPage(t, StatusZstd, make([]byte, 2048))
			o := le.Uint64(f[descOff+4*24:])
			copy(f[o:], z)
			le.PutUint32(f[descOff+4*24+8:], uint32(len(z)))
			le.PutUint32(f[descOff+4*24+12:], StatusZstd)
		}},
		{"long-page", 6, func(f []byte) {
			z := compressPage(t, StatusZlib, make([]byte, 8192))
			o := le.Uint64(f[descOff+4*24:])
			copy(f[o:], z)
			le.PutUint32(f[descOff+4*24+8:], uint32(len(z)))
			le.PutUint32(f[descOff+4*24+12:], StatusZlib)
		}},
		{"long-zstd-page", 6, func(f []byte) {
			z := compressPage(t, StatusZstd, make([]byte, 8192))
			o := le.Uint64(f[descOff+4*24:])
			copy(f[o:], z)
			le.PutUint32(f[descOff+4*24+8:], uint32(len(z)))
			le.PutUint32(f[descOff+4*24+12:], StatusZstd)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := bytes.Clone(good)
			tc.mutate(f)
			d := openBytes(t, f)
			buf := make([]byte, 4096)
			_, err := d.ReadAt(buf, tc.pfn*4096+16)
			// The page's descriptor or its data is named.
			ff := requireFormatError(t, err, -1)
			at := int64(descOff + slices.Index(pfnsOf(b), tc.pfn)*24)
			inDesc := ff.Off >= at && ff.Off < at+pageDescSize
			require.True(t, inDesc || ff.Off == int64(le.Uint64(f[at:])), "%v", err)
			var fe *memory.FaultError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.pfn*4096+16, fe.Addr)
			// Other pages still read, and the bad one fails again.
			for pfn := range b.pages {
				if pfn == tc.pfn {
					continue
				}
				_, err := d.ReadAt(buf, pfn*4096)
				require.NoError(t, err, "pfn %d", pfn)
				require.Equal(t, b.pages[pfn], buf)
			}
			_, err = d.ReadAt(buf[:8], tc.pfn*4096)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestHostileFlattened(t *testing.T) {
	hdr := func() []byte {
		out := make([]byte, flatHeaderSize)
		copy(out, sigFlat)
		binary.BigEndian.PutUint64(out[16:], 1)
		binary.BigEndian.PutUint64(out[24:], 1)
		return out
	}
	rec := func(out []byte, off, n int64, data string) []byte {
		var h [16]byte
		binary.BigEndian.PutUint64(h[0:], uint64(off))
		binary.BigEndian.PutUint64(h[8:], uint64(n))
		return append(append(out, h[:]...), data...)
	}
	tests := []struct {
		name string
		data []byte
		off  int64 // the FormatError's offset: the bad record's header
	}{
		{"negative-offset", rec(hdr(), -5, 3, "abc"), flatHeaderSize},
		{"size-beyond-file", rec(hdr(), 0, 1<<40, "abc"), flatHeaderSize},
		{"negative-size", rec(hdr(), 0, -3, "abc"), flatHeaderSize},
		{"truncated-record", append(hdr(), 1, 2, 3), flatHeaderSize},
		{"huge-offset", rec(hdr(), 1<<62+1, 3, "abc"), flatHeaderSize},
		{"bad-type", func() []byte { h := hdr(); h[23] = 2; return h }(), 16},
	}
	// The same records after a run of small ones, whose headers are read
	// ahead, must fail alike and name the bad record's offset.
	var run []byte
	for i := range int64(5) {
		run = rec(run, 10*i, 10, "0123456789")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newFlatReader(bytes.NewReader(tc.data), int64(len(tc.data)))
			requireFormatError(t, err, tc.off)
			_, err = NewDump(bytes.NewReader(tc.data))
			requireFormatError(t, err, tc.off)
			if tc.name == "bad-type" {
				return
			}
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, int64(flatHeaderSize), fe.Off)
			after := append(append(hdr(), run...), tc.data[flatHeaderSize:]...)
			_, err = newFlatReader(bytes.NewReader(after), int64(len(after)))
			requireFormatError(t, err, -1)
			require.ErrorAs(t, err, &fe)
			require.Equal(t, int64(flatHeaderSize+len(run)), fe.Off)
		})
	}
	// A flattened stream of holes only cannot make Open allocate its
	// logical size for a bitmap.
	b := newBuilder(6).fill(1)
	plain := b.build(t)
	le := binary.LittleEndian
	le.PutUint32(plain[436:], 1<<20)     // 4 GiB of bitmap blocks
	le.PutUint64(plain[4096+96:], 1<<34) // max_mapnr_64 needing 2 GiB of them
	out := rec(hdr(), 0, int64(len(plain)), string(plain))
	out = rec(out, 1<<33, 1, "x")
	_, err := NewDump(bytes.NewReader(out))
	fe := requireFormatError(t, err, -1)
	require.GreaterOrEqual(t, fe.Off, int64(0), "names where")
}

// failingReader reads data up to limit and fails beyond it.
type failingReader struct {
	data  []byte
	limit int64
}

var errDisk = errors.New("disk error")

func (r failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.limit {
		return 0, errDisk
	}
	n := copy(p, r.data[off:min(r.limit, int64(len(r.data)))])
	if n < len(p) {
		return n, errDisk
	}
	return n, nil
}

// TestFlatReadErrors fails reads inside a run of small records, whose
// headers are read ahead: the error names the first header not read.
func TestFlatReadErrors(t *testing.T) {
	out := make([]byte, flatHeaderSize)
	copy(out, sigFlat)
	binary.BigEndian.PutUint64(out[16:], 1)
	binary.BigEndian.PutUint64(out[24:], 1)
	const recSize = flatRecordHeader + 10
	for i := range int64(100) {
		var h [16]byte
		binary.BigEndian.PutUint64(h[0:], uint64(10*i))
		binary.BigEndian.PutUint64(h[8:], 10)
		out = append(append(out, h[:]...), "0123456789"...)
	}
	for _, limit := range []int64{flatHeaderSize + 1, flatHeaderSize + 5*recSize + 3, flatHeaderSize + 50*recSize + 15} {
		_, err := newFlatReader(failingReader{out, limit}, int64(len(out)))
		require.ErrorIs(t, err, errDisk)
		first := int64(flatHeaderSize)
		for first+flatRecordHeader <= limit {
			first += recSize
		}
		var ue *ReadError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, first, ue.Off, "limit %d", limit)
		requireOneLine(t, err)
	}
	f, err := newFlatReader(failingReader{out, int64(len(out))}, int64(len(out)))
	require.NoError(t, err)
	require.Equal(t, int64(1000), f.Size())
}
