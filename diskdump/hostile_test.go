package diskdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/require"
)

func requireFormatError(t *testing.T, err error, substr string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, memory.ErrCorrupt)
	require.Contains(t, err.Error(), substr)
}

func TestHostileHeaders(t *testing.T) {
	good := newBuilder(6).fill(1, 2, 3).build(t)
	le := binary.LittleEndian
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   string
	}{
		{"truncated-header", func(b []byte) []byte { return b[:100] }, "header truncated"},
		{"block-size-not-pow2", func(b []byte) []byte { le.PutUint32(b[428:], 4000); return b }, "block_size"},
		{"block-size-huge", func(b []byte) []byte { le.PutUint32(b[428:], 1<<30); return b }, "block_size"},
		{"bitmap-blocks-huge", func(b []byte) []byte { le.PutUint32(b[436:], 1<<30); return b }, "beyond end of file"},
		{"sub-hdr-negative", func(b []byte) []byte { le.PutUint32(b[432:], 0xffffffff); return b }, "sub_hdr_size"},
		{"version-negative", func(b []byte) []byte { le.PutUint32(b[8:], 0x80000000); return b }, "header_version"},
		{"max-mapnr-too-big", func(b []byte) []byte { le.PutUint64(b[4096+96:], 1<<40); return b }, "cannot cover max_mapnr"},
		{"vmcoreinfo-outside", func(b []byte) []byte { le.PutUint64(b[4096+32:], 1<<40); le.PutUint64(b[4096+40:], 5); return b }, "VMCOREINFO"},
		{"descriptors-truncated", func(b []byte) []byte { return b[:4*4096+30] }, "page descriptors"},
		{"split-range-outside", func(b []byte) []byte {
			le.PutUint32(b[4096+12:], 1)
			le.PutUint64(b[4096+80:], 5000)
			le.PutUint64(b[4096+88:], 6000)
			return b
		}, "split pfn range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(good))
			d, err := NewDump(bytes.NewReader(b))
			require.Nil(t, d)
			requireFormatError(t, err, tc.want)
		})
	}
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
		want   string
	}{
		{"offset-beyond-file", 2, func(f []byte) { le.PutUint64(f[descOff+1*24:], 1<<40) }, "data offset outside the file"},
		{"offset-zero", 2, func(f []byte) { le.PutUint64(f[descOff+1*24:], 0) }, "data offset outside the file"},
		{"size-too-big", 2, func(f []byte) { le.PutUint32(f[descOff+1*24+8:], 8192) }, "bad size"},
		{"raw-wrong-size", 5, func(f []byte) {
			le.PutUint32(f[descOff+3*24+8:], 4000)
			le.PutUint32(f[descOff+3*24+12:], 0)
		}, "not one block long"},
		{"unknown-flags", 2, func(f []byte) { le.PutUint32(f[descOff+1*24+12:], 0x100) }, "unknown compression flags"},
		{"zlib-garbage", 6, func(f []byte) {
			o := le.Uint64(f[descOff+4*24:])
			le.PutUint32(f[descOff+4*24+12:], StatusZlib)
			copy(f[o:], "garbage!")
		}, "zlib page data for pfn 0x6"},
		{"lzo-garbage", 2, func(f []byte) {
			o := le.Uint64(f[descOff+1*24:])
			le.PutUint32(f[descOff+1*24+12:], StatusLZO)
			copy(f[o:], "\x00\x00\x00\x00garbage!")
		}, "lzo page data for pfn 0x2"},
		{"snappy-garbage", 4, func(f []byte) {
			o := le.Uint64(f[descOff+2*24:])
			le.PutUint32(f[descOff+2*24+12:], StatusSnappy)
			copy(f[o:], "\xff\xff\xff\xff\x0fgarbage")
		}, "snappy page data for pfn 0x4"},
		{"zstd-garbage", 5, func(f []byte) {
			o := le.Uint64(f[descOff+3*24:])
			le.PutUint32(f[descOff+3*24+12:], StatusZstd)
			copy(f[o:], "garbage!")
		}, "zstd page data for pfn 0x5"},
		{"short-page", 6, func(f []byte) {
			// A valid zstd frame of half a page.
			z := compressPage(t, StatusZstd, make([]byte, 2048))
			o := le.Uint64(f[descOff+4*24:])
			copy(f[o:], z)
			le.PutUint32(f[descOff+4*24+8:], uint32(len(z)))
			le.PutUint32(f[descOff+4*24+12:], StatusZstd)
		}, "want 4096"},
		{"long-page", 6, func(f []byte) {
			z := compressPage(t, StatusZlib, make([]byte, 8192))
			o := le.Uint64(f[descOff+4*24:])
			copy(f[o:], z)
			le.PutUint32(f[descOff+4*24+8:], uint32(len(z)))
			le.PutUint32(f[descOff+4*24+12:], StatusZlib)
		}, "decompressed to 4097 bytes"},
		{"long-zstd-page", 6, func(f []byte) {
			z := compressPage(t, StatusZstd, make([]byte, 8192))
			o := le.Uint64(f[descOff+4*24:])
			copy(f[o:], z)
			le.PutUint32(f[descOff+4*24+8:], uint32(len(z)))
			le.PutUint32(f[descOff+4*24+12:], StatusZstd)
		}, "zstd page data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := bytes.Clone(good)
			tc.mutate(f)
			d := openBytes(t, f)
			buf := make([]byte, 4096)
			_, err := d.ReadAt(buf, tc.pfn*4096+16)
			requireFormatError(t, err, tc.want)
			var fe *memory.FaultError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.pfn*4096+16, fe.Addr)
			require.Contains(t, err.Error(), fmt.Sprintf("pfn %#x", tc.pfn))
			require.Contains(t, err.Error(), "offset 0x")
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
		want string
	}{
		{"negative-offset", rec(hdr(), -5, 3, "abc"), "negative target offset"},
		{"size-beyond-file", rec(hdr(), 0, 1<<40, "abc"), "size beyond end of file"},
		{"negative-size", rec(hdr(), 0, -3, "abc"), "size beyond end of file"},
		{"truncated-record", append(hdr(), 1, 2, 3), "record header truncated"},
		{"huge-offset", rec(hdr(), 1<<62+1, 3, "abc"), "out of range"},
		{"bad-type", func() []byte { h := hdr(); h[23] = 2; return h }(), "unknown flattened header"},
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
			requireFormatError(t, err, tc.want)
			_, err = NewDump(bytes.NewReader(tc.data))
			requireFormatError(t, err, tc.want)
			if tc.name == "bad-type" {
				return
			}
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, int64(flatHeaderSize), fe.Off)
			after := append(append(hdr(), run...), tc.data[flatHeaderSize:]...)
			_, err = newFlatReader(bytes.NewReader(after), int64(len(after)))
			requireFormatError(t, err, tc.want)
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
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "bitmap") || strings.Contains(err.Error(), "max_mapnr"), err.Error())
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
		require.Contains(t, err.Error(), fmt.Sprintf("flattened record at %#x:", first), "limit %d", limit)
	}
	f, err := newFlatReader(failingReader{out, int64(len(out))}, int64(len(out)))
	require.NoError(t, err)
	require.Equal(t, int64(1000), f.Size())
}
