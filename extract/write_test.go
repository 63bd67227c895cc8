package extract

import (
	"bytes"
	"compress/zlib"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

const testInfo = "OSRELEASE=6.1.0-test-amd64\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff8260a000\nNUMBER(phys_base)=0\nKERNELOFFSET=0\n"

// page returns a recognisable page.
func page(pfn uint64, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(pfn*7 + uint64(i)*13)
	}
	binary.LittleEndian.PutUint64(b, pfn)
	return b
}

// bufWriterAt is an in-memory io.WriterAt.
type bufWriterAt struct{ b []byte }

func (w *bufWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(w.b) {
		w.b = append(w.b, make([]byte, end-len(w.b))...)
	}
	return copy(w.b[off:], p), nil
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		bad  bool
	}{
		{in: "p:0x1000-0x3000", want: Range{Start: 0x1000, End: 0x3000}},
		{in: "v:ffffffff81000000-0xffffffff81001000", want: Range{Virtual: true, Start: 0xffffffff81000000, End: 0xffffffff81001000}},
		{in: "p:0x3000-0x1000", bad: true},
		{in: "p:0x1000-0x1000", bad: true},
		{in: "x:0-1", bad: true},
		{in: "0-1", bad: true},
		{in: "p:0x1000", bad: true},
		{in: "p:zz-0x1000", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseRange(tc.in)
			if tc.bad {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, r)
			r2, err := ParseRange(r.String())
			require.NoError(t, err)
			assert.Equal(t, r, r2)
		})
	}
}

func TestWriteELF(t *testing.T) {
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(bo.String(), func(t *testing.T) {
			mem := map[uint64][]byte{}
			for _, p := range []uint64{0, 1, 2, 7, 0x100} {
				mem[p] = page(p, 4096)
			}
			src := memory.ReaderFunc(func(p []byte, addr uint64) (int, error) {
				n := 0
				for n < len(p) {
					pg, ok := mem[(addr+uint64(n))>>12]
					if !ok {
						return n, memory.Fault(addr+uint64(n), "physical", "", memory.ErrNotSaved)
					}
					n += copy(p[n:], pg[(addr+uint64(n))&0xfff:])
				}
				return n, nil
			})
			notes := BuildNotes(bo, []Note{{Name: "CORE", Type: 1, Desc: make([]byte, 336)}, {Name: "VMCOREINFO", Desc: []byte(testInfo)}})
			e := &ELF{
				ByteOrder: bo, Machine: elf.EM_X86_64, Flags: 0, Notes: notes,
				Segments: []ELFSegment{
					{Paddr: 0, Vaddr: 0xffff888000000000, Filesz: 3 << 12, Memsz: 3 << 12},
					{Paddr: 7 << 12, Vaddr: 0xffff888000007000, Filesz: 1 << 12, Memsz: 2 << 12}, // zero tail
					{Paddr: 0x100 << 12, Vaddr: 0xffffffff81000000, Filesz: 0x800, Memsz: 0x800, Flags: elf.PF_R},
				},
				Mem: src,
			}
			var buf bytes.Buffer
			n, err := WriteELF(&buf, e)
			require.NoError(t, err)
			assert.Equal(t, int64(buf.Len()), n)
			f, err := elfcore.NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			require.NoError(t, err)
			assert.Equal(t, elf.EM_X86_64, f.Machine())
			assert.Equal(t, bo, f.ByteOrder())
			require.Len(t, f.Segments(), 3)
			for i, s := range f.Segments() {
				assert.Equal(t, e.Segments[i].Paddr, s.Paddr)
				assert.Equal(t, e.Segments[i].Vaddr, s.Vaddr)
				assert.Equal(t, e.Segments[i].Filesz, s.Filesz)
				assert.Equal(t, e.Segments[i].Memsz, s.Memsz)
			}
			assert.Equal(t, testInfo, string(f.VMCOREINFO()))
			require.Len(t, f.Notes(), 2)
			got := make([]byte, 4096)
			for _, p := range []uint64{0, 1, 2, 7} {
				require.NoError(t, memory.ReadFull(f.Physical(), got, p<<12))
				assert.Equal(t, mem[p], got, "pfn %#x", p)
			}
			require.NoError(t, memory.ReadFull(f.Physical(), got, 8<<12))
			assert.Equal(t, make([]byte, 4096), got, "zero tail")
			require.NoError(t, memory.ReadFull(f.Physical(), got[:0x800], 0x100<<12))
			assert.Equal(t, mem[0x100][:0x800], got[:0x800])
			_, err = f.Physical().ReadAt(got, 3<<12)
			assert.ErrorIs(t, err, memory.ErrNotSaved)
		})
	}
}

func TestWriteELFXNum(t *testing.T) {
	// 70000 zero-filled segments: more than e_phnum can count.
	var segs []ELFSegment
	for i := range uint64(70000) {
		segs = append(segs, ELFSegment{Paddr: i << 13, Memsz: 4096})
	}
	var buf bytes.Buffer
	_, err := WriteELF(&buf, &ELF{Machine: elf.EM_X86_64, Notes: BuildNotes(binary.LittleEndian, []Note{{Name: "VMCOREINFO", Desc: []byte(testInfo)}}), Segments: segs})
	require.NoError(t, err)
	assert.Equal(t, uint16(0xffff), binary.LittleEndian.Uint16(buf.Bytes()[56:]))
	f, err := elfcore.NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	assert.Len(t, f.Segments(), 70000)
	assert.Equal(t, testInfo, string(f.VMCOREINFO()))
}

func zlibPage(t testing.TB, b []byte) []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(b)
	require.NoError(t, w.Close())
	return z.Bytes()
}

// testKdump is a dump of 64 pfns saving pfns 1, 2, 3 (zlib), 5 and 40 (raw),
// 6 and 9 (the same stored zero page).
func testKdump(t testing.TB, bo binary.ByteOrder, ptr int, layout string, version int) (*Kdump, map[uint64][]byte) {
	const bs = 4096
	want := map[uint64][]byte{}
	blobs := map[uint64][2]any{}
	for _, p := range []uint64{1, 2, 3} {
		want[p] = page(p, bs)
		blobs[p] = [2]any{uint32(diskdump.StatusZlib), zlibPage(t, want[p])}
	}
	for _, p := range []uint64{5, 40} {
		want[p] = page(p, bs)
		blobs[p] = [2]any{uint32(0), want[p]}
	}
	for _, p := range []uint64{6, 9} {
		want[p] = make([]byte, bs)
		blobs[p] = [2]any{uint32(diskdump.StatusZlib), zlibPage(t, want[p])}
	}
	var pages []uint64
	for p := range want {
		pages = append(pages, p)
	}
	slices.Sort(pages)
	machine := "x86_64"
	if ptr == 4 {
		machine = "i686"
		if layout == "32-bit padded" {
			machine = "armv7l"
		}
	}
	notes := BuildNotes(bo, []Note{{Name: "CORE", Type: 1, Desc: make([]byte, 100)}, {Name: "VMCOREINFO", Desc: []byte(testInfo)}})
	k := &Kdump{
		Header: diskdump.Header{
			Version: version, Utsname: diskdump.Utsname{Sysname: "Linux", Release: "6.1.0-test", Machine: machine},
			Timestamp: time.Unix(1700000000, 123000).UTC(), Status: diskdump.StatusZlib, BlockSize: bs,
			MaxMapnr: 64, NrCPUs: 2, PhysBase: 0x1000000, DumpLevel: 31, ByteOrder: bo, PtrSize: ptr, SubLayout: layout,
		},
		VMCOREINFO: []byte(testInfo), Notes: notes, EraseInfo: []byte("erase foo size 8\n"),
		Pages: pages,
		Exists: func(yield func(uint64) bool) {
			for p := range uint64(48) {
				if !yield(p) {
					return
				}
			}
		},
		Page: func(pfn uint64) (uint32, []byte, error) {
			b := blobs[pfn]
			return b[0].(uint32), b[1].([]byte), nil
		},
	}
	if version < 4 {
		k.Notes = nil
	}
	if layout == "32-bit padded" {
		k.Header.PhysBase = 0 // ARM32 numbers pfns from phys_base
	}
	return k, want
}

func checkKdump(t *testing.T, d *diskdump.Dump, k *Kdump, want map[uint64][]byte) {
	t.Helper()
	h := d.Header()
	assert.Equal(t, k.Header.Version, h.Version)
	assert.Equal(t, k.Header.Release, h.Release)
	assert.Equal(t, k.Header.Machine, h.Machine)
	assert.Equal(t, k.Header.Timestamp, h.Timestamp.UTC())
	assert.Equal(t, k.Header.PhysBase, h.PhysBase)
	assert.Equal(t, k.Header.DumpLevel, h.DumpLevel)
	assert.Equal(t, k.Header.SubLayout, h.SubLayout)
	assert.Equal(t, k.Header.MaxMapnr, h.MaxMapnr)
	assert.Equal(t, testInfo, string(d.VMCOREINFO()))
	assert.Equal(t, k.Notes, d.Notes())
	if k.Header.Version >= 5 {
		assert.Equal(t, k.EraseInfo, d.EraseInfo())
	}
	assert.Equal(t, k.Pages, slices.Collect(d.SavedPFNs()))
	got := make([]byte, 4096)
	for _, p := range k.Pages {
		require.NoError(t, memory.ReadFull(d, got, p<<12), "pfn %#x", p)
		assert.Equal(t, want[p], got, "pfn %#x", p)
		flags, data, err := d.RawPage(p)
		require.NoError(t, err)
		wf, wd, _ := k.Page(p)
		assert.Equal(t, wf, flags)
		assert.Equal(t, wd, data)
	}
	_, err := d.ReadAt(got, 4<<12)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
}

func TestWriteKdump(t *testing.T) {
	for _, tc := range []struct {
		bo      binary.ByteOrder
		ptr     int
		layout  string
		version int
	}{
		{binary.LittleEndian, 8, "64-bit", 6},
		{binary.BigEndian, 8, "64-bit", 6},
		{binary.LittleEndian, 8, "64-bit", 5},
		{binary.LittleEndian, 8, "64-bit", 3},
		{binary.LittleEndian, 4, "32-bit packed", 6},
		{binary.LittleEndian, 4, "32-bit padded", 6},
	} {
		name := fmt.Sprintf("%v-%s-v%d", tc.bo, tc.layout, tc.version)
		t.Run(name, func(t *testing.T) {
			k, want := testKdump(t, tc.bo, tc.ptr, tc.layout, tc.version)
			var w bufWriterAt
			require.NoError(t, WriteKdump([]io.WriterAt{&w}, k))
			d, err := diskdump.NewDump(bytes.NewReader(w.b))
			require.NoError(t, err)
			checkKdump(t, d, k, want)
			// The shared zero page is stored once.
			assert.Less(t, len(w.b), 12*4096)
		})
	}
	t.Run("ARM32 pfn offset", func(t *testing.T) {
		// makedumpfile's ARM32 files number frames from phys_base (RAM at
		// 0x80000000 here): the pages are physical frames above it.
		k, want := testKdump(t, binary.LittleEndian, 4, "32-bit padded", 6)
		const off = 0x80000
		k.Header.PhysBase, k.Header.PFNOffset = off<<12, off
		page := k.Page
		k.Page = func(pfn uint64) (uint32, []byte, error) { return page(pfn - off) }
		shifted := map[uint64][]byte{}
		for i, p := range k.Pages {
			k.Pages[i] = p + off
			shifted[p+off] = want[p]
		}
		exists := k.Exists
		k.Exists = func(yield func(uint64) bool) {
			for p := range exists {
				if !yield(p + off) {
					return
				}
			}
		}
		var w bufWriterAt
		require.NoError(t, WriteKdump([]io.WriterAt{&w}, k))
		d, err := diskdump.NewDump(bytes.NewReader(w.b))
		require.NoError(t, err)
		assert.Equal(t, uint64(off), d.Header().PFNOffset)
		checkKdump(t, d, k, shifted)

		// An offset the reader would not derive is refused.
		k.Header.Machine = "i686"
		assert.ErrorIs(t, WriteKdump([]io.WriterAt{&w}, k), errors.ErrUnsupported)
		k.Header.Machine, k.Pages = "armv7l", []uint64{3}
		err = WriteKdump([]io.WriterAt{&w}, k)
		var pe *PFNError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, PFNError{PFN: 3, First: off, MaxMapnr: k.Header.MaxMapnr}, *pe)
		errshape.Require(t, err, "pfn 0x3 ", fmt.Sprintf("%#x", off))
		k.Pages = []uint64{off + k.Header.MaxMapnr}
		err = WriteKdump([]io.WriterAt{&w}, k)
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, PFNError{PFN: off + k.Header.MaxMapnr, First: off, MaxMapnr: k.Header.MaxMapnr}, *pe)
		errshape.Require(t, err, fmt.Sprintf("pfn %#x ", pe.PFN), fmt.Sprintf("max_mapnr %#x", k.Header.MaxMapnr))
	})
	t.Run("flattened", func(t *testing.T) {
		k, want := testKdump(t, binary.LittleEndian, 8, "64-bit", 6)
		var buf bytes.Buffer
		fw := NewFlatWriter(&buf)
		require.NoError(t, WriteKdump([]io.WriterAt{fw}, k))
		require.NoError(t, fw.Close())
		d, err := diskdump.NewDump(bytes.NewReader(buf.Bytes()))
		require.NoError(t, err)
		assert.True(t, d.Header().Flattened)
		checkKdump(t, d, k, want)
	})
	t.Run("split", func(t *testing.T) {
		k, want := testKdump(t, binary.LittleEndian, 8, "64-bit", 6)
		k.Parts = []PFNRange{{0, 4}, {4, 30}, {30, 64}}
		ws := []*bufWriterAt{{}, {}, {}}
		assert.Error(t, WriteKdump([]io.WriterAt{ws[2], ws[0], ws[1]}, &Kdump{Header: k.Header}), "three writers, one part")
		require.NoError(t, WriteKdump([]io.WriterAt{ws[0], ws[1], ws[2]}, k))
		// Any order of the parts.
		d, err := diskdump.NewDump(bytes.NewReader(ws[2].b), bytes.NewReader(ws[0].b), bytes.NewReader(ws[1].b))
		require.NoError(t, err)
		assert.True(t, d.Header().Split)
		require.Len(t, d.Header().Parts, 3)
		assert.Equal(t, uint64(3), d.Header().Parts[0].Pages)
		checkKdump(t, d, k, want)
	})
}

func TestWriteKdumpErrors(t *testing.T) {
	k, _ := testKdump(t, binary.LittleEndian, 8, "64-bit", 6)
	var w bufWriterAt
	k.Pages = []uint64{3, 1}
	assert.Error(t, WriteKdump([]io.WriterAt{&w}, k), "unsorted")
	k.Pages = []uint64{64}
	assert.Error(t, WriteKdump([]io.WriterAt{&w}, k), "beyond max_mapnr")
	k.Pages = []uint64{1}
	assert.Error(t, WriteKdump([]io.WriterAt{&w, &w}, k), "two writers, one part")
	k.Header.BlockSize = 1000
	assert.Error(t, WriteKdump([]io.WriterAt{&w}, k), "block size")
}

// TestVmcoreReadsWritten opens every written format through vmcore.
func TestVmcoreReadsWritten(t *testing.T) {
	dir := t.TempDir()
	k, want := testKdump(t, binary.LittleEndian, 8, "64-bit", 6)
	write := func(name string, f func(w io.Writer) error) string {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, f(fh))
		require.NoError(t, fh.Close())
		return p
	}
	plain := write("plain.kdump", func(w io.Writer) error { return WriteKdump([]io.WriterAt{w.(io.WriterAt)}, k) })
	flat := write("flat.kdump", func(w io.Writer) error {
		fw := NewFlatWriter(w)
		if err := WriteKdump([]io.WriterAt{fw}, k); err != nil {
			return err
		}
		return fw.Close()
	})
	var mem memory.ReaderFunc = func(p []byte, addr uint64) (int, error) {
		n := 0
		for n < len(p) {
			pg, ok := want[(addr+uint64(n))>>12]
			if !ok {
				return n, memory.Fault(addr, "physical", "", memory.ErrNotSaved)
			}
			n += copy(p[n:], pg[(addr+uint64(n))&0xfff:])
		}
		return n, nil
	}
	elfPath := write("x.elf", func(w io.Writer) error {
		_, err := WriteELF(w, &ELF{Machine: elf.EM_X86_64, Notes: k.Notes, Segments: runs(k.Pages, 12), Mem: mem})
		return err
	})
	for _, tc := range []struct{ path, format string }{{plain, "kdump"}, {flat, "kdump-flattened"}, {elfPath, "elf"}} {
		t.Run(tc.format, func(t *testing.T) {
			d, err := vmcore.Open(tc.path)
			require.NoError(t, err)
			defer d.Close()
			assert.Equal(t, tc.format, d.Format())
			assert.Equal(t, testInfo, string(d.VMCOREINFO()))
			got := make([]byte, 4096)
			for _, p := range k.Pages {
				require.NoError(t, memory.ReadFull(d.Physical(), got, p<<12))
				assert.Equal(t, want[p], got)
			}
		})
	}
}
