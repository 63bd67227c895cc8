package diskdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/require"
)

var codecs = []struct {
	name string
	flag uint32
}{{"raw", 0}, {"zlib", StatusZlib}, {"lzo", StatusLZO}, {"snappy", StatusSnappy}, {"zstd", StatusZstd}}

// standardPFNs is a pfn set with holes, runs, and pfns either side of
// 64-bit word and rank-group boundaries.
var standardPFNs = []uint64{0, 1, 2, 3, 10, 63, 64, 65, 100, 127, 128, 511, 512, 513, 700, 1000, 1023}

func openBytes(t testing.TB, files ...[]byte) *Dump {
	t.Helper()
	rs := make([]io.ReaderAt, len(files))
	for i, f := range files {
		rs[i] = bytes.NewReader(f)
	}
	d, err := NewDump(rs...)
	require.NoError(t, err)
	return d
}

// checkPages reads every saved pfn of b, every pfn below 2048 and a few
// beyond max_mapnr, and compares them with b's pages; pfns for which
// present returns false must read as not saved.
func checkPages(t *testing.T, d *Dump, b *builder, present func(uint64) bool) {
	t.Helper()
	bs := uint64(b.bs)
	buf := make([]byte, bs)
	pfns := []uint64{b.maxMapnr, b.maxMapnr + 1, 1 << 40}
	for pfn := range min(b.maxMapnr, 2048) {
		pfns = append(pfns, pfn)
	}
	for pfn := range b.pages {
		pfns = append(pfns, pfn)
	}
	// The checks of each pfn are plain comparisons, and testify reports
	// only a pfn that fails them: thousands of pfns per dump would
	// otherwise spend most of the test in testify's t.Helper stack walks.
	for _, pfn := range pfns {
		want, saved := b.pages[pfn]
		saved = saved && (present == nil || present(pfn))
		paddr := (pfn + d.Header().PFNOffset) * bs
		n, err := d.ReadAt(buf, paddr)
		if !saved {
			var fe *memory.FaultError
			if err == nil || !errors.Is(err, memory.ErrNotSaved) || !errors.As(err, &fe) || fe.Addr != paddr || fe.Space != "physical" || n != 0 {
				require.Error(t, err, "pfn %#x", pfn)
				require.ErrorIs(t, err, memory.ErrNotSaved, "pfn %#x", pfn)
				require.ErrorAs(t, err, &fe)
				require.Equal(t, paddr, fe.Addr)
				require.Equal(t, memory.SpacePhysical, fe.Space)
				require.Zero(t, n)
				t.Fatalf("pfn %#x: read %d bytes, %v", pfn, n, err)
			}
			continue
		}
		if err != nil || n != int(bs) {
			require.NoError(t, err, "pfn %#x", pfn)
			require.Equal(t, int(bs), n)
		}
		if !bytes.Equal(want, buf) {
			t.Fatalf("pfn %#x content differs", pfn)
		}
	}
}

// expectedCodecs counts the codecs the builder stored.
func expectedCodecs(b *builder) map[string]int {
	out := map[string]int{}
	for _, f := range b.stored {
		out[codecName(f)]++
	}
	return out
}

func TestVersionsAndCodecs(t *testing.T) {
	for v := 0; v <= 7; v++ {
		for _, c := range codecs {
			t.Run(fmt.Sprintf("v%d/%s", v, c.name), func(t *testing.T) {
				b := newBuilder(v).fill(standardPFNs...)
				b.codec = func(uint64) uint32 { return c.flag }
				b.status = c.flag
				b.vmcoreinfo = []byte("OSRELEASE=6.1.0-test\nPAGESIZE=4096\n")
				b.notes = []byte("notes!!!")
				b.eraseinfo = []byte("erase foo size 4\n")
				d := openBytes(t, b.build(t))
				h := d.Header()
				require.Equal(t, v, h.Version)
				require.Equal(t, 4096, h.BlockSize)
				require.Equal(t, "x86_64", h.Machine)
				require.Equal(t, "6.1.0-test", h.Release)
				require.Equal(t, "#1 SMP", h.Utsname.Version)
				require.Equal(t, uint64(1024), h.MaxMapnr)
				require.Equal(t, binary.ByteOrder(binary.LittleEndian), h.ByteOrder)
				require.Equal(t, 8, h.PtrSize)
				require.Equal(t, int64(1700000000), h.Timestamp.Unix())
				require.Equal(t, 2, h.NrCPUs)
				if v >= 1 {
					require.Equal(t, 31, h.DumpLevel)
				}
				if v >= 3 {
					require.Equal(t, b.vmcoreinfo, d.VMCOREINFO())
				} else {
					require.Nil(t, d.VMCOREINFO())
				}
				if v >= 4 {
					require.Equal(t, b.notes, d.Notes())
				} else {
					require.Nil(t, d.Notes())
				}
				if v >= 5 {
					require.Equal(t, b.eraseinfo, d.EraseInfo())
				}
				checkPages(t, d, b, nil)
				require.Equal(t, standardPFNs, slices.Collect(d.SavedPFNs()))
				comp := d.Compressions()
				require.Equal(t, expectedCodecs(b), comp)
				if c.flag != 0 {
					require.NotZero(t, comp[c.name], "%v", comp)
				}
				// Raw page round trip.
				flags, raw, err := d.RawPage(1)
				require.NoError(t, err)
				require.Equal(t, b.pages[1], decodeRaw(t, flags, raw, b.bs))
				_, _, err = d.RawPage(5)
				require.ErrorIs(t, err, memory.ErrNotSaved)
			})
		}
	}
}

func decodeRaw(t *testing.T, flags uint32, raw []byte, bs int) []byte {
	var dc decoders
	out := make([]byte, bs)
	if flags == 0 {
		return raw
	}
	n, err := dc.decode(out, raw, flags)
	require.NoError(t, err)
	require.Equal(t, bs, n)
	return out
}

func TestLayouts(t *testing.T) {
	tests := []struct {
		name string
		mod  func(b *builder)
	}{
		{"big-endian-s390x", func(b *builder) { b.bo = binary.BigEndian; b.machine = "s390x" }},
		{"64k-blocks-arm64", func(b *builder) { b.bs = 65536; b.machine = "aarch64" }},
		{"i686-packed", func(b *builder) { b.layout, b.sub, b.machine = &layout32, &sub32pack, "i686" }},
		{"armv7-padded", func(b *builder) {
			b.layout, b.sub, b.machine = &layout32, &sub32pad, "armv7l"
			b.physBase = 0x80000000
		}},
		{"unknown-32-packed", func(b *builder) { b.layout, b.sub, b.machine = &layout32, &sub32pack, "" }},
		{"unknown-32-padded", func(b *builder) { b.layout, b.sub, b.machine = &layout32, &sub32pad, "" }},
		{"unknown-64-be", func(b *builder) { b.bo = binary.BigEndian; b.machine = "" }},
		{"ppc-32-be", func(b *builder) { b.layout, b.sub, b.machine, b.bo = &layout32, &sub32pack, "ppc", binary.BigEndian }},
		{"single-bitmap", func(b *builder) { b.noFirstBM = true; b.maxMapnr = 4096 * 8 }},
		{"big-maxmapnr", func(b *builder) { b.maxMapnr = 1 << 20; b.fill(1<<20 - 1) }},
	}
	for _, tc := range tests {
		for _, c := range codecs {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				b := newBuilder(6)
				b.vmcoreinfo = []byte("PAGESIZE=4096\n")
				tc.mod(b)
				b.fill(standardPFNs...)
				b.codec = func(uint64) uint32 { return c.flag }
				d := openBytes(t, b.build(t))
				h := d.Header()
				require.Equal(t, b.bs, d.PageSize())
				require.Equal(t, b.bo, h.ByteOrder)
				require.Equal(t, b.layout.PtrSize, h.PtrSize)
				require.Equal(t, b.sub.Name, h.SubLayout)
				require.Equal(t, b.vmcoreinfo, d.VMCOREINFO())
				if b.machine == "armv7l" {
					require.Equal(t, uint64(0x80000000>>12), h.PFNOffset)
				}
				checkPages(t, d, b, nil)
			})
		}
	}
}

func TestMixedCodecsAndSpanningReads(t *testing.T) {
	b := newBuilder(6).fill(10, 11, 12, 13, 14, 15, 20)
	b.codec = func(pfn uint64) uint32 { return codecs[pfn%5].flag }
	d := openBytes(t, b.build(t))
	// A read across six pages.
	buf := make([]byte, 6*4096-100)
	n, err := d.ReadAt(buf, 10*4096+50)
	require.NoError(t, err)
	require.Equal(t, len(buf), n)
	want := slices.Concat(b.pages[10], b.pages[11], b.pages[12], b.pages[13], b.pages[14], b.pages[15], b.pages[16])
	_ = want
	require.Equal(t, slices.Concat(b.pages[10], b.pages[11], b.pages[12], b.pages[13], b.pages[14], b.pages[15])[50:50+len(buf)], buf)
	// A read running into an excluded page stops there.
	buf = make([]byte, 2*4096)
	n, err = d.ReadAt(buf, 15*4096+8)
	require.Equal(t, 4096-8, n)
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(16*4096), fe.Addr)
	require.ErrorIs(t, err, memory.ErrNotSaved)
	// Beyond max_mapnr and at the top of the address space.
	_, err = d.ReadAt(buf[:8], 1<<40)
	require.ErrorIs(t, err, memory.ErrNotSaved)
	_, err = d.ReadAt(buf[:16], ^uint64(0)-7)
	require.ErrorIs(t, err, memory.ErrNotSaved)
	// Cache churn: more pages than the cache holds, twice.
	b2 := newBuilder(6)
	for pfn := range uint64(300) {
		b2.fill(pfn)
	}
	b2.codec = func(pfn uint64) uint32 { return codecs[pfn%5].flag }
	d2 := openBytes(t, b2.build(t))
	checkPages(t, d2, b2, nil)
	checkPages(t, d2, b2, nil)
	require.Equal(t, expectedCodecs(b2), d2.Compressions())
}

func TestFlattened(t *testing.T) {
	for _, tc := range []struct {
		name             string
		chunk            int
		shuffle, overlap bool
	}{
		{"in-order", 4096, false, false},
		{"odd-chunks", 1000, false, false},
		{"shuffled", 3000, true, false},
		{"overlapping", 4096, false, true},
		{"shuffled-overlapping", 5000, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(6).fill(standardPFNs...)
			b.codec = func(pfn uint64) uint32 { return codecs[pfn%5].flag }
			b.vmcoreinfo = []byte("OSRELEASE=x\n")
			plain := b.build(t)
			flat := flatten(plain, tc.chunk, tc.shuffle, tc.overlap)
			require.True(t, Probe(bytes.NewReader(flat)))
			d := openBytes(t, flat)
			require.True(t, d.Header().Flattened)
			require.Equal(t, b.vmcoreinfo, d.VMCOREINFO())
			checkPages(t, d, b, nil)
			// The rearranged view equals the plain file.
			f, err := newFlatReader(bytes.NewReader(flat), int64(len(flat)))
			require.NoError(t, err)
			got := make([]byte, f.Size())
			_, err = f.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, plain, got)
		})
	}
}

func TestFlatHoles(t *testing.T) {
	out := make([]byte, flatHeaderSize)
	copy(out, sigFlat)
	binary.BigEndian.PutUint64(out[16:], 1)
	binary.BigEndian.PutUint64(out[24:], 1)
	rec := func(off int64, data string) {
		var h [16]byte
		binary.BigEndian.PutUint64(h[0:], uint64(off))
		binary.BigEndian.PutUint64(h[8:], uint64(len(data)))
		out = append(append(out, h[:]...), data...)
	}
	rec(10, "abcdef")
	rec(0, "XY")
	rec(12, "12")
	rec(20, "zz")
	rec(11, "")
	// No end marker: the stream stops at a record boundary.
	f, err := newFlatReader(bytes.NewReader(out), int64(len(out)))
	require.NoError(t, err)
	require.Equal(t, int64(22), f.Size())
	got := make([]byte, 22)
	n, err := f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, 22, n)
	require.Equal(t, "XY\x00\x00\x00\x00\x00\x00\x00\x00ab12ef\x00\x00\x00\x00zz", string(got))
	n, err = f.ReadAt(got[:5], 20)
	require.Equal(t, 2, n)
	require.ErrorIs(t, err, io.EOF)
	require.False(t, Probe(bytes.NewReader(out)))
}

// TestResolveOverlaps checks the shortcuts for records in order and for
// disjoint records out of order against the sweep.
func TestResolveOverlaps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name            string
		shuffle, adjoin bool
	}{{"in-order", false, false}, {"shuffled", true, false}, {"shuffled-adjoining", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []flatSeg
			off, fileOff := int64(0), int64(flatHeaderSize)
			for range 200 {
				if !tc.adjoin {
					off += int64(r.IntN(3)) // some records adjoin, some leave holes
				}
				n := int64(1 + r.IntN(50))
				recs = append(recs, flatSeg{off: off, n: n, fileOff: fileOff + flatRecordHeader})
				off += n
				fileOff += flatRecordHeader + n
			}
			if tc.shuffle {
				r.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			}
			want := sweepOverlaps(slices.Clone(recs))
			require.Equal(t, want, resolveOverlaps(slices.Clone(recs)))
		})
	}
}

func TestSplit(t *testing.T) {
	b := newBuilder(6).fill(standardPFNs...)
	b.codec = func(pfn uint64) uint32 { return codecs[pfn%5].flag }
	b.vmcoreinfo = []byte("OSRELEASE=x\n")
	ranges := [][2]uint64{{0, 64}, {64, 600}, {600, 1024}}
	var files [][]byte
	for _, r := range ranges {
		bb := *b
		bb.split, bb.start, bb.end = true, r[0], r[1]
		files = append(files, bb.build(t))
	}
	t.Run("all-any-order", func(t *testing.T) {
		d := openBytes(t, files[2], files[0], files[1])
		h := d.Header()
		require.True(t, h.Split)
		require.Len(t, h.Parts, 3)
		for i, r := range ranges {
			require.Equal(t, r[0], h.Parts[i].StartPFN)
			require.Equal(t, r[1], h.Parts[i].EndPFN)
		}
		checkPages(t, d, b, nil)
		require.Equal(t, standardPFNs, slices.Collect(d.SavedPFNs()))
	})
	t.Run("one-missing", func(t *testing.T) {
		d := openBytes(t, files[2], files[0])
		checkPages(t, d, b, func(pfn uint64) bool { return pfn < 64 || pfn >= 600 })
	})
	t.Run("flattened-part", func(t *testing.T) {
		d := openBytes(t, files[0], flatten(files[1], 4096, true, false), files[2])
		checkPages(t, d, b, nil)
	})
	t.Run("overlap", func(t *testing.T) {
		_, err := NewDump(bytes.NewReader(files[1]), bytes.NewReader(files[1]))
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("not-split", func(t *testing.T) {
		plain := newBuilder(6).fill(1).build(t)
		_, err := NewDump(bytes.NewReader(plain), bytes.NewReader(plain))
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("v2-32bit-fields", func(t *testing.T) {
		var fs [][]byte
		for _, r := range ranges {
			bb := *b
			bb.version = 2
			bb.vmcoreinfo = nil
			bb.split, bb.start, bb.end = true, r[0], r[1]
			fs = append(fs, bb.build(t))
		}
		d := openBytes(t, fs[1], fs[2], fs[0])
		checkPages(t, d, b, nil)
	})
	t.Run("open-files", func(t *testing.T) {
		dir := t.TempDir()
		var paths []string
		for i, f := range files {
			p := filepath.Join(dir, fmt.Sprintf("dump.%d", i))
			require.NoError(t, os.WriteFile(p, f, 0o600))
			paths = append(paths, p)
		}
		d, err := Open(paths[1], paths[2], paths[0])
		require.NoError(t, err)
		checkPages(t, d, b, nil)
		require.NoError(t, d.Close())
	})
}

func TestIncomplete(t *testing.T) {
	b := newBuilder(6).fill(standardPFNs...)
	b.status = StatusIncomplete
	file := b.build(t)
	// Zero the descriptors of the last three pages, as makedumpfile leaves
	// them, and cut the file inside the data of the page before those.
	descOff := 4 * 4096
	bo := binary.LittleEndian
	n := len(standardPFNs)
	for i := n - 3; i < n; i++ {
		clear(file[descOff+i*24 : descOff+i*24+24])
	}
	last := int(bo.Uint64(file[descOff+(n-4)*24:]))
	file = file[:last+100]
	d := openBytes(t, file)
	require.True(t, d.Header().Incomplete())
	buf := make([]byte, 4096)
	for i, pfn := range standardPFNs {
		_, err := d.ReadAt(buf, pfn*4096)
		if i >= n-4 {
			require.ErrorIs(t, err, memory.ErrNotSaved, "pfn %d", pfn)
			continue
		}
		require.NoError(t, err, "pfn %d", pfn)
		require.Equal(t, b.pages[pfn], buf)
	}
	require.Equal(t, 4, d.Compressions()["lost"])

	// Cut inside the descriptor table too.
	d = openBytes(t, file[:descOff+5*24+7])
	_, err := d.ReadAt(buf, 700*4096)
	require.ErrorIs(t, err, memory.ErrNotSaved)
}

func TestProbe(t *testing.T) {
	plain := newBuilder(6).fill(1).build(t)
	require.True(t, Probe(bytes.NewReader(plain)))
	require.True(t, Probe(bytes.NewReader(flatten(plain, 4096, false, false))))
	require.False(t, Probe(bytes.NewReader([]byte("\x7fELF"))))
	require.False(t, Probe(bytes.NewReader(nil)))
	// A flattened stream whose first record is not the header.
	flat := flatten(plain, 4096, false, true)
	require.True(t, Probe(bytes.NewReader(flat)))
	_, err := NewDump(bytes.NewReader([]byte("\x7fELF\x02\x01\x01")))
	require.ErrorIs(t, err, ErrUnrecognizedFormat)
	dd := slices.Clone(plain)
	copy(dd, sigDiskdump)
	require.True(t, Probe(bytes.NewReader(dd)))
	_, err = NewDump(bytes.NewReader(dd))
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestVMCOREINFOFromNotes(t *testing.T) {
	b := newBuilder(4).fill(1)
	var notes []byte
	addNote := func(name, desc string) {
		var h [12]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(len(name)+1))
		binary.LittleEndian.PutUint32(h[4:], uint32(len(desc)))
		binary.LittleEndian.PutUint32(h[8:], 0)
		notes = append(notes, h[:]...)
		notes = append(notes, name...)
		notes = append(notes, make([]byte, (len(name)+1+3)&^3-len(name))...)
		notes = append(notes, desc...)
		notes = append(notes, make([]byte, (len(desc)+3)&^3-len(desc))...)
	}
	addNote("CORE", "prstatus-ish")
	addNote("VMCOREINFO", "OSRELEASE=6.1\nPAGESIZE=4096\n")
	b.notes = notes
	d := openBytes(t, b.build(t))
	require.Equal(t, "OSRELEASE=6.1\nPAGESIZE=4096\n", string(d.VMCOREINFO()))
}

// TestLZOVectors decodes page blobs that makedumpfile compressed with
// liblzo2 (see testdata/README.md) and compares them with the raw pages.
func TestLZOVectors(t *testing.T) {
	blobs, err := filepath.Glob("testdata/lzo/*.lzo")
	require.NoError(t, err)
	require.NotEmpty(t, blobs)
	for _, f := range blobs {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			want, err := os.ReadFile(f[:len(f)-len(".lzo")] + ".page")
			require.NoError(t, err)
			var dc decoders
			dst := make([]byte, 4096)
			n, err := dc.decode(dst, src, StatusLZO)
			require.NoError(t, err)
			require.Equal(t, 4096, n)
			require.Equal(t, want, dst)
			// Truncated and one-byte-damaged blobs fail cleanly.
			for cut := range len(src) {
				dc.decode(dst, src[:cut], StatusLZO)
			}
			bad := bytes.Clone(src)
			for i := range bad {
				bad[i] ^= 0x5a
				dc.decode(dst, bad, StatusLZO)
				bad[i] ^= 0x5a
			}
		})
	}
}

// readPages reads like ReadAt, one page at a time: the reference a read of
// many pages must match.
func readPages(d *Dump, p []byte, paddr uint64) (int, error) {
	bs := uint64(d.PageSize())
	n := 0
	for n < len(p) {
		a := paddr + uint64(n)
		m := min(len(p)-n, int(bs-a%bs))
		k, err := d.ReadAt(p[n:n+m], a)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestReadMany checks reads of many pages, decoded on several goroutines,
// against page-by-page reads: every codec, cached and uncached pages,
// partial pages at either end, an excluded page, and corrupt page data.
func TestReadMany(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	b := newBuilder(6)
	for pfn := range uint64(400) {
		if pfn != 395 {
			b.fill(pfn)
		}
	}
	b.codec = func(pfn uint64) uint32 { return codecs[pfn%5].flag }
	file := b.build(t)
	bad := slices.Clone(file)
	r := rand.New(rand.NewPCG(9, 9))
	for range 20 { // corrupt bytes spread over the page data
		bad[len(bad)/3+r.IntN(len(bad)/2)] ^= 0x5a
	}
	for _, data := range [][]byte{file, bad} {
		many, ref := openBytes(t, data), openBytes(t, data)
		var small [8]byte
		for q := range 60 {
			if q%3 == 0 { // leave some pages cached
				_, _ = many.ReadAt(small[:], uint64(r.IntN(400))*4096)
			}
			addr := uint64(r.IntN(380 * 4096))
			size := 16*4096 + r.IntN(60*4096)
			if q%4 == 0 {
				addr &^= 4095
				size &^= 4095
			}
			if q < 2 { // more pages than one batch of decoding holds
				addr, size = uint64(q)*(4096+5), (maxBatch+40)*4096
			}
			got, want := make([]byte, size), make([]byte, size)
			n, err := many.ReadAt(got, addr)
			wn, werr := readPages(ref, want, addr)
			require.Equal(t, wn, n, "read %#x+%#x", addr, size)
			if i := firstDiff(want[:wn], got[:n]); i >= 0 {
				t.Fatalf("read %#x+%#x: byte %#x (address %#x, pfn %d) differs", addr, size, i, addr+uint64(i), (addr+uint64(i))/4096)
			}
			if werr == nil {
				require.NoError(t, err)
				continue
			}
			require.Error(t, err)
			require.Equal(t, werr.Error(), err.Error())
			var fe, wfe *memory.FaultError
			require.ErrorAs(t, err, &fe)
			require.ErrorAs(t, werr, &wfe)
			require.Equal(t, wfe.Addr, fe.Addr)
		}
	}
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
