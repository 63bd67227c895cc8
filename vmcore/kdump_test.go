package vmcore

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// kdumpBytes writes a minimal kdump-compressed file (header version 6,
// 64-bit little-endian layout, 4 KiB blocks, raw pages) holding pages
// (pfn → 4096 bytes), with VMCOREINFO inside the ELF note blob, as
// makedumpfile lays it out (docs/formats.md §3.3).
func kdumpBytes(pages map[uint64][]byte, maxMapnr uint64, notes []elfcoretest.Note) []byte {
	const bs = 4096
	le := binary.LittleEndian
	blob := elfcoretest.NoteBytes(le, 4, notes)
	noteOff := bs + 104
	subBlocks := (104 + len(blob) + bs - 1) / bs
	bmBlocks := 2 * ((int(maxMapnr+7)/8 + bs - 1) / bs)
	descOff := (1 + subBlocks + bmBlocks) * bs
	pfns := make([]uint64, 0, len(pages))
	for p := range pages {
		pfns = append(pfns, p)
	}
	slices.Sort(pfns)
	dataOff := descOff + (len(pfns)*24+bs-1)/bs*bs
	out := make([]byte, dataOff+len(pfns)*bs)

	copy(out, "KDUMP   ")
	le.PutUint32(out[8:], 6)
	copy(out[12+4*65:], "x86_64")
	le.PutUint32(out[428:], bs)
	le.PutUint32(out[432:], uint32(subBlocks))
	le.PutUint32(out[436:], uint32(bmBlocks))
	le.PutUint32(out[440:], uint32(maxMapnr))
	le.PutUint32(out[460:], 1)

	sub := out[bs:]
	le.PutUint32(sub[8:], 1) // dump_level
	for _, n := range notes {
		if n.Name == "VMCOREINFO" {
			i := bytes.Index(blob, n.Desc)
			le.PutUint64(sub[32:], uint64(noteOff+i))
			le.PutUint64(sub[40:], uint64(len(n.Desc)))
		}
	}
	le.PutUint64(sub[48:], uint64(noteOff))
	le.PutUint64(sub[56:], uint64(len(blob)))
	le.PutUint64(sub[96:], maxMapnr)
	copy(out[noteOff:], blob)

	bm1 := out[(1+subBlocks)*bs:]
	bm2 := out[(1+subBlocks+bmBlocks/2)*bs:]
	for i, p := range pfns {
		bm1[p/8] |= 1 << (p % 8)
		bm2[p/8] |= 1 << (p % 8)
		d := out[descOff+i*24:]
		le.PutUint64(d[0:], uint64(dataOff+i*bs))
		le.PutUint32(d[8:], bs)
		copy(out[dataOff+i*bs:], pages[p])
	}
	return out
}

// TestKdumpMatchesELF writes the same memory as an ELF core and as a kdump
// file and checks that both open alike and read the same bytes.
func TestKdumpMatchesELF(t *testing.T) {
	le := binary.LittleEndian
	notes := []elfcoretest.Note{
		{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusX86_64(le, 9, 0xffffffff81000040, 0xffffc90000003000)},
		elfcoretest.VMCOREINFONote(infoX86),
	}
	pages := map[uint64][]byte{}
	var segs []elfcoretest.Segment
	for _, pfn := range []uint64{0, 1, 2, 7, 0x1000, 0x1001} {
		pages[pfn] = pattern(4096, byte(pfn))
		segs = append(segs, elfcoretest.Segment{Paddr: pfn << 12, Data: pages[pfn]})
	}
	kd := kdumpBytes(pages, 0x1100, notes)
	ec := (&elfcoretest.Builder{Notes: notes, Segments: segs}).Bytes()

	dk, err := OpenReaderAt(bytes.NewReader(kd), int64(len(kd)), Options{})
	require.NoError(t, err)
	defer dk.Close()
	de, err := OpenReaderAt(bytes.NewReader(ec), int64(len(ec)), Options{})
	require.NoError(t, err)
	defer de.Close()

	assert.Equal(t, "kdump", dk.Format())
	assert.Equal(t, "kdump-header", dk.InfoSource())
	assert.Equal(t, string(de.VMCOREINFO()), string(dk.VMCOREINFO()))
	assert.Equal(t, "x86_64", dk.Arch().Name)
	assert.Equal(t, "kdump-header", dk.Arch().Source)
	assert.Equal(t, de.CPUs(), dk.CPUs())
	assert.Equal(t, 4096, dk.PageSize())

	var ranges [][2]uint64
	dk.be.ranges(func(s, l uint64) bool { ranges = append(ranges, [2]uint64{s, l}); return true })
	assert.Equal(t, [][2]uint64{{0, 0x2fff}, {0x7000, 0x7fff}, {0x1000000, 0x1001fff}}, ranges)

	for _, a := range []uint64{0, 0x800, 0x2ff0, 0x7000, 0x1000ff8} {
		want, got := make([]byte, 32), make([]byte, 32)
		ne, erre := de.Physical().ReadAt(want, a)
		nk, errk := dk.Physical().ReadAt(got, a)
		assert.Equal(t, ne, nk, "%#x", a)
		assert.Equal(t, erre == nil, errk == nil, "%#x: %v / %v", a, erre, errk)
		assert.Equal(t, want[:ne], got[:nk], "%#x", a)
	}
	_, err = dk.Physical().ReadAt(make([]byte, 8), 0x3000)
	assert.ErrorIs(t, err, memory.ErrNotSaved)

	// The scan finds the note in memory of a kdump file too.
	mem := pattern(4096, 0)
	copy(mem[0x100:], noteBytes(le, infoX86))
	kd2 := kdumpBytes(map[uint64][]byte{5: mem}, 16, nil)
	d, err := OpenReaderAt(bytes.NewReader(kd2), int64(len(kd2)), Options{})
	require.NoError(t, err)
	assert.Equal(t, "memory-scan at 0x5100", d.InfoSource())
	d.Close()
}
