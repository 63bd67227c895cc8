package vtop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rvBuilder writes riscv64 Sv39/Sv48/Sv57 page tables into a physMem.
type rvBuilder struct {
	m      *physMem
	root   uint64
	levels int
}

// rvPTE is an entry for pa with flags (A and D set, as the kernel does:
// bits the walk must ignore).
func rvPTE(pa, flags uint64) uint64 { return pa>>12<<rvPPNShift | flags | rvValid | 1<<6 | 1<<7 }

// mapPage maps va → pa with a leaf of 1<<sizeShift bytes (12, 21, 30, 39
// or 48), entry flags rwx (and any others).
func (b *rvBuilder) mapPage(va, pa uint64, sizeShift uint, rwx uint64) {
	bo := binary.LittleEndian
	table := b.root
	for l := b.levels; ; l-- {
		shift := uint(12 + 9*(l-1))
		at := table + (va>>shift&511)*8
		if shift == sizeShift {
			b.m.put64(bo, at, rvPTE(pa, rwx))
			return
		}
		e := b.m.get(bo, 8, at)
		if e&rvValid == 0 {
			e = rvPTE(b.m.alloc(), 0)
			b.m.put64(bo, at, e)
		}
		table = rvPA(e)
	}
}

// The synthetic kernel: RAM from 0x80000000 (phys_ram_base), the image
// linked at KERNEL_LINK_ADDR and loaded 2 MiB into RAM (after OpenSBI),
// swapper_pg_dir inside it.
const (
	rvRAM      = 0x80000000
	rvImageVA  = 0xffffffff80000000
	rvImagePA  = 0x80200000
	rvKVO      = rvImageVA - rvImagePA // va_kernel_pa_offset
	rvStext    = rvImageVA + 0x2000
	rvSwapper  = rvImageVA + 0x1a00000
	rvModule   = 0xffffffff7f001000 // a module page (MODULES_VADDR..MODULES_END)
	rvModulePA = 0x12345000
)

var rvPageOffset = map[int]uint64{3: 0xffffffd600000000, 4: 0xffffaf8000000000, 5: 0xff60000000000000}

func rvInfo(t testing.TB, levels int, extra ...string) *vmcoreinfo.Info {
	return info(t, append([]string{
		fmt.Sprintf("NUMBER(VA_BITS)=%d", 12+9*levels), fmt.Sprintf("NUMBER(phys_ram_base)=%d", rvRAM),
		fmt.Sprintf("NUMBER(PAGE_OFFSET)=0x%x", rvPageOffset[levels]),
		fmt.Sprintf("NUMBER(KERNEL_LINK_ADDR)=0x%x", uint64(rvImageVA)),
		fmt.Sprintf("NUMBER(va_kernel_pa_offset)=0x%x", uint64(rvKVO)),
		fmt.Sprintf("SYMBOL(_stext)=%x", uint64(rvStext)), fmt.Sprintf("SYMBOL(swapper_pg_dir)=%x", uint64(rvSwapper)),
	}, extra...)...)
}

// rvFixture maps the image with 2 MiB pages, the first GiB of RAM in the
// linear map with one 1 GiB page, and a module page.
func rvFixture(t testing.TB, levels int) (*physMem, *rvBuilder) {
	m := newPhysMem(4096)
	b := &rvBuilder{m: m, root: rvSwapper - rvKVO, levels: levels}
	m.page(b.root >> 12)
	for off := uint64(0); off < 32<<20; off += 2 << 20 {
		b.mapPage(rvImageVA+off, rvImagePA+off, 21, rvRead|rvWrite|rvExec)
	}
	b.mapPage(rvPageOffset[levels], rvRAM, 30, rvRead|rvWrite)
	b.mapPage(rvModule, rvModulePA, 12, rvRead|rvExec)
	return m, b
}

func newRV(t testing.TB, m memory.Reader, in *vmcoreinfo.Info) Translator {
	tr, err := New(Config{Arch: "riscv64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: m})
	require.NoError(t, err)
	return tr
}

func TestRISCV64(t *testing.T) {
	for _, levels := range []int{3, 4, 5} {
		t.Run(fmt.Sprintf("Sv%d", 12+9*levels), func(t *testing.T) {
			m, b := rvFixture(t, levels)
			po := rvPageOffset[levels]
			// A 64 KiB NAPOT page and the largest leaf of each level.
			napot := uint64(0xffffffff7f010000)
			for i := uint64(0); i < 16; i++ {
				b.mapPage(napot+i<<12, 0x22220000|rvNapot64K<<12, 12, rvRead|rvNapot)
			}
			big := map[uint]uint64{}
			top := uint(12 + 9*(levels-1))
			for s := uint(21); s <= top; s += 9 {
				// each in its own top-level entry at the bottom of the kernel half
				va := ^uint64(0)<<(top+8) + uint64(top-s)<<top
				big[s] = va
				b.mapPage(va, 1<<s*3, s, rvRead|rvWrite)
			}
			tr := newRV(t, m, rvInfo(t, levels))
			l := tr.Layout()
			assert.Equal(t, levels, l.Levels)
			assert.Equal(t, uint64(rvSwapper-rvKVO), l.Root)
			assert.Equal(t, po, l.DirectMap)
			require.Len(t, l.FastPaths, 2, tr.Describe())
			assert.Equal(t, uint64(rvImageVA), l.FastPaths[0].Start, "the image head, mapped by the walk as by the rule")
			assert.Equal(t, po+1<<(12+9*uint(levels)-2)-1, l.FastPaths[1].Last)

			for _, c := range []struct{ va, pa uint64 }{
				{rvImageVA, rvImagePA},
				{rvStext + 0x123, rvStext + 0x123 - rvKVO},
				{rvSwapper, rvSwapper - rvKVO},
				{po + 0x1234567, rvRAM + 0x1234567},
				{rvModule + 0xabc, rvModulePA + 0xabc},
				{napot + 0x5678, 0x22225678},
			} {
				pa, err := tr.Translate(c.va)
				require.NoError(t, err, "%#x", c.va)
				assert.Equal(t, hexs(c.pa), hexs(pa), "%#x", c.va)
				// The walk agrees with the fast paths.
				pa, err = WalkForTest(tr, c.va)
				require.NoError(t, err, "%#x", c.va)
				assert.Equal(t, hexs(c.pa), hexs(pa), "walk %#x", c.va)
			}
			for s, va := range big {
				pa, err := tr.Translate(va + 0x1234)
				require.NoError(t, err, "%d-bit leaf", s)
				assert.Equal(t, hexs(1<<s*3+0x1234), hexs(pa), "%d-bit leaf", s)
			}

			// The page tables list the module page, the NAPOT run and
			// the image as mapped.
			var runs [][2]uint64
			require.NoError(t, tr.(Mapper).Mapped(0xffffffff7f000000, rvImageVA+4<<20, func(s, e uint64) bool {
				runs = append(runs, [2]uint64{s, e})
				return true
			}))
			assert.Equal(t, [][2]uint64{{rvModule, rvModule + 4096}, {napot, napot + 0x10000}, {rvImageVA, rvImageVA + 4<<20}}, runs)
		})
	}
}

func TestRISCV64Faults(t *testing.T) {
	const levels = 4
	m, b := rvFixture(t, levels)
	bad := uint64(0xffffffff7f200000)
	b.mapPage(bad, 0x40001000, 21, rvRead)                       // misaligned 2 MiB page
	b.mapPage(bad+2<<20, 0x40000000, 21, rvWrite)                // W without R
	b.mapPage(bad+4<<20+0x1000, 0x40000000, 12, 0)               // a table pointer at the last level
	b.mapPage(bad+6<<20, 0x40000000|0x3<<12, 12, rvRead|rvNapot) // unknown NAPOT size
	b.mapPage(bad+8<<20, 0x7654000, 12, rvRead)
	tr := newRV(t, m, rvInfo(t, levels))

	_, err := tr.Translate(rvModule + 0x1000)
	ee := walkFault(t, err, rvModule+0x1000, "pte")
	assert.ErrorIs(t, err, ErrNotMapped)
	assert.True(t, ee.Read)

	for _, c := range []struct {
		va    uint64
		level string
		what  string
	}{
		{bad, "pmd", "misaligned superpage"},
		{bad + 2<<20, "pmd", "writable but not readable"},
		{bad + 4<<20 + 0x1000, "pte", "below the last level"},
		{bad + 6<<20, "pte", "NAPOT"},
	} {
		_, err := tr.Translate(c.va)
		ee := walkFault(t, err, c.va, c.level)
		assert.ErrorIs(t, err, memory.ErrCorrupt)
		assert.Contains(t, ee.What, c.what)
	}

	// A page table missing from the dump: the level and its address.
	e := m.get(binary.LittleEndian, 8, b.root+(bad>>39&511)*8)
	pud := rvPA(e)
	e = m.get(binary.LittleEndian, 8, pud+(bad>>30&511)*8)
	delete(m.pages, rvPA(e)>>12)
	_, err = tr.Translate(bad + 8<<20)
	ee = walkFault(t, err, bad+8<<20, "pmd")
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	assert.False(t, ee.Read)

	// Not canonical for Sv48.
	_, err = tr.Translate(0xff00ffff7f001000)
	assert.ErrorIs(t, err, ErrNotMapped)
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, uint64(0xff00ffff7f001000), fe.Addr)
	assert.False(t, errors.As(err, new(*EntryError)), "refused before the walk, by the address alone")
	errshape.Require(t, err)
}

func TestRISCV64New(t *testing.T) {
	m, _ := rvFixture(t, 3)
	cfg := func(in *vmcoreinfo.Info) Config {
		return Config{Arch: "riscv64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: m}
	}
	_, err := New(cfg(nil))
	requireMissing(t, err, "riscv64", "")
	_, err = New(cfg(info(t, "SYMBOL(swapper_pg_dir)=ffffffff81a00000")))
	requireMissing(t, err, "riscv64", "NUMBER(VA_BITS)")
	_, err = New(cfg(info(t, "NUMBER(VA_BITS)=47", "SYMBOL(swapper_pg_dir)=ffffffff81a00000")))
	requireUnsupported(t, err, UnsupportedError{Arch: "riscv64", What: "VA_BITS", Val: 47, Supported: "Sv39, Sv48 or Sv57"})
	c := cfg(rvInfo(t, 3))
	c.PageSize = 65536
	_, err = New(c)
	requireUnsupported(t, err, UnsupportedError{Arch: "riscv64", What: "page size", Val: 65536})

	// swapper_pg_dir not in the dump: New names the table, unread.
	mm := newPhysMem(4096)
	_, err = New(Config{Arch: "riscv64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: rvInfo(t, 3), Phys: mm})
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	ee := walkFault(t, err, rvSwapper, "pgd")
	assert.Equal(t, uint64(rvSwapper-rvKVO), ee.Addr)
	assert.False(t, ee.Read)

	// No va_kernel_pa_offset line: before v5.13 the image, and so
	// swapper_pg_dir, lay in the linear map.
	in := info(t, "NUMBER(VA_BITS)=39", fmt.Sprintf("NUMBER(phys_ram_base)=%d", rvRAM),
		"NUMBER(PAGE_OFFSET)=0xffffffd600000000", "SYMBOL(swapper_pg_dir)=ffffffd601c00000")
	tr, err := New(cfg(in))
	require.NoError(t, err)
	assert.Equal(t, uint64(0x81c00000), tr.Layout().Root)
	assert.Len(t, tr.Layout().FastPaths, 1)
	_, err = New(cfg(info(t, "NUMBER(VA_BITS)=39", "SYMBOL(swapper_pg_dir)=ffffffff81a00000")))
	requireMissing(t, err, "riscv64", "NUMBER(va_kernel_pa_offset)")
}

// TestRISCV64ImageHead: where the walk does not map the 2 MiB below _stext
// as va_kernel_pa_offset says, the image fast path starts at _stext.
func TestRISCV64ImageHead(t *testing.T) {
	m, b := rvFixture(t, 3)
	b.mapPage(rvImageVA, 0x90000000, 21, rvRead|rvExec)
	tr := newRV(t, m, rvInfo(t, 3))
	assert.Equal(t, uint64(rvStext), tr.Layout().FastPaths[0].Start)
	assert.Contains(t, tr.Describe(), "image head")
	pa, err := tr.Translate(rvImageVA)
	require.NoError(t, err)
	assert.Equal(t, hexs(0x90000000), hexs(pa))
}
