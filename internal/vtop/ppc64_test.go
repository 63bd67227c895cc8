package vtop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ppcBuilder builds Book3S-64 Linux page tables (big-endian entries) in a
// physMem, tables placed one after another from next.
type ppcBuilder struct {
	m    *physMem
	root uint64
	p    *ppc64 // the geometry
	next uint64
}

// ppcRoot is swapper_pg_dir's physical address in the tests (a 6.12
// guest's).
const ppcRoot = 0x2750000

func newPPCBuilder(m *physMem, pageShift uint, geo ppcGeometry) *ppcBuilder {
	return newPPCBuilderAt(m, ppcRoot, pageShift, geo)
}

func newPPCBuilderAt(m *physMem, root uint64, pageShift uint, geo ppcGeometry) *ppcBuilder {
	b := &ppcBuilder{m: m, root: root, p: newPPC64Walker(m, root, pageShift, geo)}
	b.next = b.root + b.tableSize(ppcLevels)
	b.zero(b.root, b.tableSize(ppcLevels))
	return b
}

func (b *ppcBuilder) tableSize(l int) uint64 { return 8 << b.p.geo[l] }

func (b *ppcBuilder) zero(pa, size uint64) {
	for a := pa &^ 0xfff; a < pa+size; a += 4096 {
		b.m.page(a >> 12)
	}
}

func (b *ppcBuilder) alloc(l int) uint64 {
	size := max(b.tableSize(l), 256) // radix's PDE needs 256-byte alignment
	pa := (b.next + size - 1) &^ (size - 1)
	b.next = pa + size
	b.zero(pa, size)
	return pa
}

// mapPage maps va → pa with a leaf at level leaf (1: a page, 2: a pmd
// huge page, 3: a pud huge page).
func (b *ppcBuilder) mapPage(va, pa uint64, leaf int) {
	bo := binary.BigEndian
	table := b.root
	for l := ppcLevels; ; l-- {
		at := table + (va>>b.p.shift[l]&(1<<b.p.geo[l]-1))*8
		if l == leaf {
			// present, leaf, accessed, dirty, privileged, read/write,
			// and hash-4k's H_PAGE_F_GIX slot bits (53..55), which are
			// no part of the address
			b.m.put64(bo, at, pa|ppcPresent|ppcLeaf|0x18e|7<<53)
			return
		}
		e := b.m.get(bo, 8, at)
		if e&ppcPresent == 0 {
			next := b.alloc(l - 1)
			e = next | ppcPresent | uint64(b.p.geo[l-1]) // radix: NLS, the next table's index bits
			b.m.put64(bo, at, e)
		}
		table = e &^ ppcMaskedBits
	}
}

func ppcInfo(t testing.TB, pageSize int, radix string, extra ...string) *vmcoreinfo.Info {
	lines := []string{fmt.Sprintf("PAGESIZE=%d", pageSize), fmt.Sprintf("SYMBOL(swapper_pg_dir)=%x", uint64(ppcPageOffset+ppcRoot)),
		"SYMBOL(_stext)=c000000000000000", "KERNELOFFSET=0"}
	if radix != "" {
		lines = append(lines, "NUMBER(RADIX_MMU)="+radix)
	}
	return info(t, append(lines, extra...)...)
}

func newPPCTranslator(t testing.TB, m *physMem, in *vmcoreinfo.Info) Translator {
	t.Helper()
	tr, err := New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: m})
	require.NoError(t, err)
	return tr
}

func TestPPC64Radix4K(t *testing.T) {
	m := newPhysMem(4096)
	b := newPPCBuilder(m, 12, ppcRadix4K)
	b.mapPage(0xc008000000001000, 0x12345000, 1)
	b.mapPage(0xc008000000200000, 0x400000, 2)
	b.mapPage(0xc008000040000000, 0x80000000, 3)
	b.mapPage(0xc000000000000000, 0, 3) // the linear map, as radix maps it
	tr := newPPCTranslator(t, m, ppcInfo(t, 4096, "1", "NUMBER(VMALLOC_START)=0xc008000000000000"))
	for _, c := range []struct{ va, pa uint64 }{
		{0xc008000000001abc, 0x12345abc},
		{0xc0080000002fffff, 0x4fffff},
		{0xc008000041234567, 0x81234567},
		{0xc000000001234567, 0x1234567}, // fast path
		{0xc007ffffffffffff, 0x7ffffffffffff},
	} {
		pa, err := tr.Translate(c.va)
		require.NoError(t, err, "%#x", c.va)
		assert.Equal(t, c.pa, pa, "%#x", c.va)
	}
	x := tr.(*translator)
	pa, err := x.walk(0xc000000000012345)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x12345), pa, "the walk agrees with the linear map")
	l := tr.Layout()
	assert.Equal(t, 4, l.Levels)
	assert.Equal(t, uint64(ppcRoot), l.Root)
	assert.Equal(t, uint64(ppcPageOffset), l.DirectMap)
	assert.Contains(t, tr.Describe(), "radix MMU")

	// Faults name the address and the level.
	_, err = tr.Translate(0xc008000000002000)
	walkFault(t, err, 0xc008000000002000, "pte")
	_, err = tr.Translate(0xc008000000400000)
	walkFault(t, err, 0xc008000000400000, "pmd")
	_, err = tr.Translate(0xc008000080000000)
	walkFault(t, err, 0xc008000080000000, "pud")
	_, err = tr.Translate(0xc008100000000000)
	ee := walkFault(t, err, 0xc008100000000000, "pgd")
	assert.ErrorIs(t, err, ErrNotMapped)
	assert.Equal(t, uint64(ppcRoot+0x1020*8), ee.Addr)
	for _, va := range []uint64{0x1000, 0x8000000000000000, 0xc010000000000000} {
		_, err = tr.Translate(va)
		require.ErrorIs(t, err, ErrNotMapped, "%#x", va)
		var fe *memory.FaultError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, va, fe.Addr)
	}
}

func TestPPC64Radix4KBadTables(t *testing.T) {
	m := newPhysMem(4096)
	b := newPPCBuilder(m, 12, ppcRadix4K)
	b.mapPage(0xc008000000001000, 0x12345000, 1)
	tr := newPPCTranslator(t, m, ppcInfo(t, 4096, "1"))
	// A pgd entry pointing outside the dump.
	b.m.put64(binary.BigEndian, ppcRoot+0x1001*8, 0x7700000000|ppcPresent|9)
	_, err := tr.Translate(0xc008008000000000)
	walkFault(t, err, 0xc008008000000000, "pud")
	require.ErrorIs(t, err, memory.ErrNotSaved)
	// A pte that is not a leaf.
	x := tr.(*translator)
	va := uint64(0xc008000000003000)
	b.mapPage(va, 0x5000, 1)
	// Clear _PAGE_PTE in the pte just written.
	at := ppcPTEAddr(t, b, va)
	b.m.put64(binary.BigEndian, at, b.m.get(binary.BigEndian, 8, at)&^ppcLeaf)
	_, err = x.walk(va)
	walkFault(t, err, va, "pte")
	require.ErrorIs(t, err, memory.ErrCorrupt)
}

// ppcPTEAddr returns the physical address of va's pte, following the
// builder's tables.
func ppcPTEAddr(t *testing.T, b *ppcBuilder, va uint64) uint64 {
	table := b.root
	for l := ppcLevels; l > 1; l-- {
		e := b.m.get(binary.BigEndian, 8, table+(va>>b.p.shift[l]&(1<<b.p.geo[l]-1))*8)
		require.NotZero(t, e&ppcPresent)
		table = e &^ ppcMaskedBits
	}
	return table + (va>>b.p.shift[1]&(1<<b.p.geo[1]-1))*8
}

func TestPPC64Geometries(t *testing.T) {
	for _, c := range []struct {
		name       string
		pageSize   int
		radix      string
		geo        ppcGeometry
		vmalloc    uint64
		linearLast uint64
		beyond     uint64
	}{
		{"radix-64k", 65536, "1", ppcRadix64K, 0xc008000000000000, 0xc007ffffffffffff, 0xc010000000000000},
		{"hash-4k", 4096, "0", ppcHash4K, 0xc000100000000000, 0xc0000fffffffffff, 0xc000400000000000},
		{"hash-64k", 65536, "0", ppcHash64K, 0xc008000000000000, 0xc007ffffffffffff, 0xc010000000000000},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newPhysMem(4096)
			shift := pageShiftOf(uint64(c.pageSize))
			b := newPPCBuilder(m, shift, c.geo)
			ps := uint64(c.pageSize)
			b.mapPage(c.vmalloc+ps, 0x12340000, 1)
			b.mapPage(c.vmalloc+7*ps, 0x56780000, 1)
			tr := newPPCTranslator(t, m, ppcInfo(t, c.pageSize, c.radix))
			assert.Equal(t, c.pageSize, tr.Layout().PageSize)
			pa, err := tr.Translate(c.vmalloc + ps + ps - 1)
			require.NoError(t, err)
			assert.Equal(t, 0x12340000+ps-1, pa)
			pa, err = tr.Translate(c.vmalloc + 7*ps + 0x10)
			require.NoError(t, err)
			assert.Equal(t, uint64(0x56780010), pa)
			pa, err = tr.Translate(c.linearLast)
			require.NoError(t, err)
			assert.Equal(t, c.linearLast-ppcPageOffset, pa)
			_, err = tr.Translate(c.vmalloc + 2*ps)
			walkFault(t, err, c.vmalloc+2*ps, "pte")
			_, err = tr.Translate(c.beyond)
			require.ErrorIs(t, err, ErrNotMapped)
			var runs [][2]uint64
			require.NoError(t, tr.(Mapper).Mapped(c.vmalloc, c.vmalloc+1<<30, func(s, e uint64) bool {
				runs = append(runs, [2]uint64{s, e})
				return true
			}))
			assert.Equal(t, [][2]uint64{{c.vmalloc + ps, c.vmalloc + 2*ps}, {c.vmalloc + 7*ps, c.vmalloc + 8*ps}}, runs)
		})
	}
}

// TestPPC64MMUWithoutRadixNumber: a kernel that does not print
// NUMBER(RADIX_MMU) is radix when the radix walk maps _stext as the linear
// map does.
func TestPPC64MMUWithoutRadixNumber(t *testing.T) {
	m := newPhysMem(4096)
	b := newPPCBuilder(m, 12, ppcRadix4K)
	b.mapPage(0xc000000000000000, 0, 3)
	b.mapPage(0xc008000000001000, 0x12345000, 1)
	tr := newPPCTranslator(t, m, ppcInfo(t, 4096, ""))
	assert.Contains(t, tr.Describe(), "radix MMU (no NUMBER(RADIX_MMU)")
	pa, err := tr.Translate(0xc008000000001008)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x12345008), pa)

	m = newPhysMem(4096)
	b = newPPCBuilder(m, 12, ppcHash4K)
	b.mapPage(0xc000100000001000, 0x12345000, 1)
	tr = newPPCTranslator(t, m, ppcInfo(t, 4096, ""))
	assert.Contains(t, tr.Describe(), "hash MMU (no NUMBER(RADIX_MMU)")
	pa, err = tr.Translate(0xc000100000001008)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x12345008), pa)
}

func TestPPC64NewErrors(t *testing.T) {
	m := newPhysMem(4096)
	_, err := New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: m})
	require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	_, err = New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: m, Info: info(t, "SYMBOL(swapper_pg_dir)=c000000002750000")})
	require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo, "no PAGESIZE")
	_, err = New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: m, Info: ppcInfo(t, 16384, "1")})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = New(Config{Arch: "ppc64", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 4}, Phys: m, Info: ppcInfo(t, 4096, "1")})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: m, Info: ppcInfo(t, 4096, "1", "NUMBER(VMALLOC_START)=0x1000")})
	require.ErrorIs(t, err, memory.ErrCorrupt)
	_, err = New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: m, Info: info(t, "PAGESIZE=4096", "SYMBOL(swapper_pg_dir)=2750000")})
	require.ErrorIs(t, err, memory.ErrCorrupt)
	// Without swapper_pg_dir: the linear map only.
	tr, err := New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: m, Info: info(t, "PAGESIZE=4096", "NUMBER(RADIX_MMU)=1")})
	require.NoError(t, err)
	pa, err := tr.Translate(0xc000000000001000)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x1000), pa)
	_, err = tr.Translate(0xc008000000001000)
	require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	assert.Contains(t, tr.Describe(), "page-table walk: off")
}

// TestPPC64BigEndianKernel: the tables are big-endian whatever the
// kernel's byte order.
func TestPPC64BigEndianKernel(t *testing.T) {
	m := newPhysMem(4096)
	b := newPPCBuilder(m, 16, ppcHash64K)
	b.mapPage(0xc008000000010000, 0x120000, 1)
	tr, err := New(Config{Arch: "ppc64", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: ppcInfo(t, 65536, "0"), Phys: m})
	require.NoError(t, err)
	pa, err := tr.Translate(0xc008000000012345)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x122345), pa)
}
