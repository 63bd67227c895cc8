package vtop

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// s390Builder builds s390x DAT tables in a physMem: region and segment
// tables of 2048 entries (16 KiB, four pages), page tables of 256 (2 KiB,
// two to a page), new tables filled with invalid entries of their type.
type s390Builder struct {
	m      *physMem
	root   uint64
	top    int
	ptHalf uint64 // the half page where the next page table goes: 0 or 2048
	ptPage uint64
}

func newS390Builder(m *physMem, root uint64, top int) *s390Builder {
	b := &s390Builder{m: m, root: root, top: top}
	b.initCRST(root, top)
	return b
}

// initCRST fills the region or segment table at pa, of level l, with
// invalid entries of its type.
func (b *s390Builder) initCRST(pa uint64, l int) {
	for i := uint64(0); i < s390CRSTEntries; i++ {
		b.m.put64(binary.BigEndian, pa+i*8, uint64(l-2)<<2|s390EntryInvalid)
	}
}

// allocCRST returns four fresh contiguous pages.
func (b *s390Builder) allocCRST() uint64 {
	for {
		pa := b.m.alloc()
		if b.m.pages[pa>>12+1] == nil && b.m.pages[pa>>12+2] == nil && b.m.pages[pa>>12+3] == nil {
			for i := uint64(1); i < 4; i++ {
				b.m.page(pa>>12 + i)
			}
			return pa
		}
	}
}

func (b *s390Builder) allocPT() uint64 {
	if b.ptHalf == 0 {
		b.ptPage = b.m.alloc()
	}
	pa := b.ptPage + b.ptHalf
	b.ptHalf ^= 2048
	for i := uint64(0); i < 256; i++ {
		b.m.put64(binary.BigEndian, pa+i*8, s390PageInvalid)
	}
	return pa
}

// mapPage maps va → pa with a 4 KiB page (sizeShift 12), a 1 MiB segment
// (20) or a 2 GiB region-third frame (31).
func (b *s390Builder) mapPage(va, pa uint64, sizeShift uint) {
	bo := binary.BigEndian
	table := b.root
	for l := b.top; ; l-- {
		if l == s390Page {
			b.m.put64(bo, table+(va>>12&0xff)*8, pa|0x100)
			return
		}
		at := table + (va>>s390Shift[l]&(s390CRSTEntries-1))*8
		tt := uint64(l-2) << 2
		if s390Shift[l] == sizeShift {
			b.m.put64(bo, at, pa|tt|s390EntryFC)
			return
		}
		e := b.m.get(bo, 8, at)
		if e&s390EntryInvalid != 0 {
			var next uint64
			if l == s390Segment {
				next = b.allocPT()
				e = next
			} else {
				next = b.allocCRST()
				b.initCRST(next, l-1)
				e = next | tt | s390RegionTL
			}
			b.m.put64(bo, at, e)
		}
		if l == s390Segment {
			table = e & s390PTOrigin
		} else {
			table = e & s390TableOrigin
		}
	}
}

// s390 6.1 layout: image and memory identity-mapped (va = pa), modules in
// vmalloc space below the top of a region-third table's 4 TiB.
const (
	s390Stext  = 0x100000
	s390Root   = 0x1a00000 // swapper_pg_dir
	s390HighMe = 0x1234560 // high_memory
)

func s390Info(t testing.TB, extra ...string) *vmcoreinfo.Info {
	return info(t, append([]string{"SYMBOL(_stext)=100000", "SYMBOL(swapper_pg_dir)=1a00000",
		"SYMBOL(high_memory)=1234560", "SYMBOL(lowcore_ptr)=1300000", "KERNELOFFSET=0"}, extra...)...)
}

func TestS390XWalk(t *testing.T) {
	for _, top := range []int{s390RegionThird, s390RegionSecond, s390RegionFirst} {
		t.Run(s390Levels[top], func(t *testing.T) {
			m := newPhysMem(4096)
			m.put64(binary.BigEndian, s390HighMe, 0x10000000) // 256 MiB
			b := newS390Builder(m, s390Root, top)
			// The identity map as Linux builds it: 1 MiB segments.
			for pa := uint64(0); pa < 0x10000000; pa += 1 << 20 {
				b.mapPage(pa, pa, 20)
			}
			vmalloc := uint64(0x3ff00000000) // 6.1: modules/vmalloc near the top of 4 TiB
			if top >= s390RegionSecond {
				vmalloc = 0x1ff0000000000 // a region-second kernel's vmalloc lies above 4 TiB
			}
			b.mapPage(vmalloc+0x5000, 0x0abcd000, 12)
			b.mapPage(vmalloc+0x6000, 0x00123000, 12)
			b.mapPage(vmalloc+0x100000, 0x0f000000, 20)
			b.mapPage(vmalloc+0x80000000, 0x80000000, 31)
			tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: m})
			require.NoError(t, err)
			l := tr.Layout()
			assert.Equal(t, top, l.Levels)
			assert.Equal(t, uint64(s390Root), l.Root)
			for _, c := range []struct{ va, pa uint64 }{
				{0xe0c, 0xe0c},
				{s390Stext + 0x1234, s390Stext + 0x1234},
				{0xfffffff, 0xfffffff},
				{vmalloc + 0x5abc, 0x0abcdabc},
				{vmalloc + 0x6fff, 0x00123fff},
				{vmalloc + 0x1ffff0, 0x0f0ffff0},
				{vmalloc + 0x80000000 + 0x7654321, 0x87654321},
			} {
				pa, err := tr.Translate(c.va)
				require.NoError(t, err, "%#x", c.va)
				assert.Equal(t, c.pa, pa, "%#x", c.va)
			}
			// The walk agrees with the identity fast path.
			x := tr.(*translator)
			for _, va := range []uint64{0, s390Stext, s390Root, 0xfffffff} {
				pa, err := x.walk(va)
				require.NoError(t, err, "%#x", va)
				assert.Equal(t, va, pa)
			}
			for _, va := range []uint64{vmalloc + 0x7000, vmalloc + 0x300000, 0x10000000} {
				_, err := tr.Translate(va)
				assert.ErrorIs(t, err, ErrNotMapped, "%#x", va)
				var fe *memory.FaultError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, va, fe.Addr)
			}
			// Beyond what the top table can address.
			if top < s390RegionFirst {
				_, err := tr.Translate(1 << (s390Shift[top] + 11))
				assert.ErrorIs(t, err, ErrNotMapped)
			}
		})
	}
}

func TestS390XFaults(t *testing.T) {
	m := newPhysMem(4096)
	b := newS390Builder(m, s390Root, s390RegionThird)
	b.mapPage(0, 0, 20)
	b.mapPage(0x3ff80005000, 0x5000, 12)
	tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: m})
	require.NoError(t, err)
	x := tr.(*translator)
	rtIdx := uint64(0x3ff80005000 >> 31 & 2047)
	rte := m.get(binary.BigEndian, 8, s390Root+rtIdx*8)
	set := func(at, v uint64) { m.put64(binary.BigEndian, at, v); x.flush() }

	// A table length that leaves out the quarter of the index.
	set(s390Root+rtIdx*8, rte&^s390RegionTL) // TL 0: only entries 0..511 of the segment table
	_, err = tr.Translate(0x3ff80005000)     // segment index 0 is in quarter 0: fine
	require.NoError(t, err)
	set(s390Root+rtIdx*8, rte&^s390RegionTL|1<<6|1) // TF 1, TL 1: quarter 0 missing
	_, err = tr.Translate(0x3ff80005000)
	assert.ErrorIs(t, err, ErrNotMapped)
	errshape.Require(t, err, "segment table index")
	// A region-third entry claiming to be of another type.
	set(s390Root+rtIdx*8, rte&^s390EntryTypeMask|2<<2)
	_, err = tr.Translate(0x3ff80005000)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	ee := walkFault(t, err, 0x3ff80005000, "region-third table")
	assert.Equal(t, s390Root+rtIdx*8, ee.Addr)
	assert.True(t, ee.Read)
	// A next table that is not in the dump.
	set(s390Root+rtIdx*8, 0x7f000000|1<<2|3)
	_, err = tr.Translate(0x3ff80005000)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	ee = walkFault(t, err, 0x3ff80005000, "segment table")
	assert.False(t, ee.Read)
	set(s390Root+rtIdx*8, rte)
	_, err = tr.Translate(0x3ff80005000)
	require.NoError(t, err)

	// swapper_pg_dir: missing, unreadable, or with entries of two types.
	in := info(t, "SYMBOL(_stext)=100000", "KERNELOFFSET=0")
	tr, err = New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: in, Phys: m})
	require.NoError(t, err)
	_, err = tr.Translate(0x3ff80005000)
	assert.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	_, err = New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: newPhysMem(4096)})
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	m.put64(binary.BigEndian, s390Root+8*100, 0x2000|2<<2)
	_, err = New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: m})
	assert.ErrorIs(t, err, memory.ErrCorrupt)
}

// TestS390XIdentityBase: from ≈v6.10 the image has its own virtual region
// (va − KERNELOFFSET + KERNELOFFPHYS) and the identity map starts at
// IDENTITYBASE; both fast paths agree with the walk.
func TestS390XIdentityBase(t *testing.T) {
	const (
		ident  = 0x2000000000 // IDENTITYBASE
		kva    = 0x3ffe0000000
		kphys  = 0x2000000
		stext  = kva + 0x100000
		root   = kva + 0x1a00000
		hmVA   = kva + 0x1234560
		memEnd = 0x10000000
	)
	m := newPhysMem(4096)
	m.put64(binary.BigEndian, hmVA-kva+kphys, ident+memEnd)
	b := newS390Builder(m, root-kva+kphys, s390RegionThird)
	for pa := uint64(0); pa < memEnd; pa += 1 << 20 {
		b.mapPage(ident+pa, pa, 20)
	}
	for off := uint64(0); off < 0x2000000; off += 1 << 20 {
		b.mapPage(kva+off, kphys+off, 20)
	}
	b.mapPage(0x3ff00005000, 0x5000, 12)
	in := info(t, "SYMBOL(_stext)="+hexs(stext), "SYMBOL(swapper_pg_dir)="+hexs(root), "SYMBOL(high_memory)="+hexs(hmVA),
		"KERNELOFFSET="+hexs(kva), "KERNELOFFPHYS="+hexs(kphys), "IDENTITYBASE="+hexs(ident))
	tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: in, Phys: m})
	require.NoError(t, err)
	assert.Equal(t, uint64(ident), tr.Layout().DirectMap)
	x := tr.(*translator)
	for _, c := range []struct{ va, pa uint64 }{
		{stext + 0x10, kphys + 0x100010},
		{root, root - kva + kphys},
		{ident, 0},
		{ident + memEnd - 1, memEnd - 1},
		{0x3ff00005123, 0x5123},
	} {
		pa, err := tr.Translate(c.va)
		require.NoError(t, err, "%#x", c.va)
		assert.Equal(t, c.pa, pa, "%#x", c.va)
		wpa, err := x.walk(c.va)
		require.NoError(t, err, "walk %#x", c.va)
		assert.Equal(t, c.pa, wpa, "walk %#x", c.va)
	}
	// Identity-mapped below IDENTITYBASE no longer.
	_, err = tr.Translate(0x100000)
	assert.ErrorIs(t, err, ErrNotMapped)
}
