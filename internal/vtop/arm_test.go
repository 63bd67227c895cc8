package vtop

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// armFixture is a 32-bit ARM kernel's swapper_pg_dir in synthetic memory:
// lowmem [po, po+256 MiB) mapped to [phys, ...) by sections (short
// descriptors) or 2 MiB blocks (LPAE), swapper_pg_dir 16 KiB (LPAE: 20
// KiB, with its pmd tables in the four pages after it) below TEXT_OFFSET
// 0x208000, as Debian's armmp kernels lay them out, and a few test
// mappings made with mapPage.
type armFixture struct {
	m         *physMem
	lpae      bool
	po, phys  uint64
	swapper   uint64
	root      uint64
	nextTable uint64 // short descriptors: next free 1 KiB second-level table
}

func newARMFixture(t testing.TB, lpae bool, po, phys uint64) *armFixture {
	m := newPhysMem(4096)
	f := &armFixture{m: m, lpae: lpae, po: po, phys: phys, swapper: po + 0x204000}
	if lpae {
		f.swapper = po + 0x203000
	}
	f.root = f.swapper - po + phys
	bo := binary.LittleEndian
	if lpae {
		for i := range uint64(4) {
			m.put64(bo, f.root+i*8, (f.root+0x1000*(i+1))|3)
		}
		for va := po; va < po+256<<20; va += 2 << 20 {
			m.put64(bo, f.pmd(va), (va-po+phys)|1|1<<10) // AF
		}
	} else {
		for i := range uint64(4) {
			m.page((f.root >> 12) + i)
		}
		for va := po; va < po+256<<20; va += 1 << 20 {
			m.put32(bo, f.root+(va>>20)*4, uint32(va-po+phys)|0x2|0xc00) // AP
		}
	}
	return f
}

// pmd returns the physical address of va's pmd entry (LPAE).
func (f *armFixture) pmd(va uint64) uint64 {
	return f.root + 0x1000*(va>>30+1) + (va>>21&511)*8
}

// mapPage maps va → pa with a page of 1<<shift bytes: short descriptors
// 12 (small), 16 (large), 20 (section), 24 (supersection); LPAE 12, 21
// (block), 30 (first-level block).
func (f *armFixture) mapPage(va, pa uint64, shift uint) {
	bo := binary.LittleEndian
	m := f.m
	if f.lpae {
		switch shift {
		case 30:
			m.put64(bo, f.root+(va>>30)*8, pa|1)
		case 21:
			m.put64(bo, f.pmd(va), pa|1)
		case 12:
			e := m.get(bo, 8, f.pmd(va))
			if e&3 != 3 {
				e = m.alloc() | 3
				m.put64(bo, f.pmd(va), e)
			}
			m.put64(bo, e&armLPAEAddrMask+(va>>12&511)*8, pa|3|1<<10)
		}
		return
	}
	l1 := f.root + (va>>20)*4
	switch shift {
	case 24:
		e := uint32(pa&0xff000000) | uint32(pa>>32&0xf)<<20 | uint32(pa>>36&0xf)<<5 | armL1Super | 2
		for i := range uint64(16) {
			m.put32(bo, (l1&^63)+i*4, e)
		}
	case 20:
		m.put32(bo, l1, uint32(pa)|2)
	default:
		e := m.get(bo, 4, l1)
		if e&3 != armL1Table {
			if f.nextTable == 0 || f.nextTable&0xfff == 0 {
				f.nextTable = m.alloc()
			}
			e = f.nextTable | armL1Table
			f.nextTable += 1024
			m.put32(bo, l1, uint32(e))
		}
		at := e&armL2TableMask + (va>>12&0xff)*4
		if shift == 16 {
			for i := range uint64(16) {
				m.put32(bo, (at&^63)+i*4, uint32(pa)&0xffff0000|armL2Large)
			}
			return
		}
		m.put32(bo, at, uint32(pa)|armL2Small|0x30)
	}
}

func (f *armFixture) new(t testing.TB, ranges bool) Translator {
	lines := []string{"SYMBOL(swapper_pg_dir)=" + hexs(f.swapper), "SYMBOL(_stext)=" + hexs(f.po+0x100000),
		"SYMBOL(init_uts_ns)=" + hexs(f.po+0x1b9d09c), "PAGESIZE=4096"}
	if f.lpae {
		lines = append(lines, "CONFIG_ARM_LPAE=y")
	}
	cfg := Config{Arch: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4, PageSize: 4096}, Info: info(t, lines...), Phys: f.m}
	if ranges {
		// The saved ranges of an extract: a boot ROM, then from
		// swapper_pg_dir's page on (PHYS_OFFSET is 2 MiB and a page below).
		cfg.PhysRanges = func(yield func(start, last uint64) bool) {
			_ = yield(0x1000, 0x1fff) && yield(f.root&^0xfff, f.phys+256<<20-1)
		}
	}
	tr, err := New(cfg)
	require.NoError(t, err)
	return tr
}

func TestARM(t *testing.T) {
	for _, c := range []struct {
		name     string
		lpae     bool
		po, phys uint64
		ranges   bool
	}{
		{"short descriptors", false, 0xC0000000, 0x40000000, true},
		{"LPAE", true, 0xC0000000, 0x40000000, true},
		{"short descriptors, 2G/2G, RAM at 0x80000000, no ranges", false, 0x80000000, 0x80000000, false},
		{"LPAE, RAM at 0, no ranges", true, 0xC0000000, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newARMFixture(t, c.lpae, c.po, c.phys)
			mod := c.po - 16<<20 // MODULES_VADDR
			want := map[uint64]uint64{
				f.swapper:          f.root,
				c.po + 0x1234:      c.phys + 0x1234,
				c.po + 0x1234567:   c.phys + 0x1234567,
				c.po + 0x100abc:    c.phys + 0x100abc, // _stext, in the image fast path
				mod + 0xabc:        0x3456_7abc,
				mod + 0x21abc:      0x3457_1abc, // LPAE: a page; short: a large page
				0xf0123456:         0x2_3012_3456,
				0x40000000 + 0x123: 0x1_0000_0123,
			}
			f.mapPage(mod, 0x3456_7000, 12)
			if c.lpae {
				f.mapPage(mod+0x21000, 0x3457_1000, 12)
				f.mapPage(0xf0000000, 0x2_3000_0000, 21)
				f.mapPage(0x40000000, 0x1_0000_0000, 30)
			} else {
				f.mapPage(mod+0x20000, 0x3457_0000, 16)
				f.mapPage(0xf0000000, 0x2_3000_0000, 24) // supersection, PA[35:32] = 2
				f.mapPage(0x40000000, 0x1_0000_0000, 24)
				want[0xfe000000+0x12345] = 0xab_fe01_2345 // supersection, PA[39:36] = 0xa
				f.mapPage(0xfe000000, 0xab_fe00_0000, 24)
			}
			tr := f.new(t, c.ranges)
			l := tr.Layout()
			assert.Equal(t, c.po, l.DirectMap)
			assert.Equal(t, "page tables", l.DirectMapSource)
			assert.Equal(t, c.phys, l.PhysBase)
			assert.Equal(t, f.root, l.Root)
			assert.Equal(t, map[bool]int{false: 2, true: 3}[c.lpae], l.Levels)
			x := tr.(*translator)
			for va, pa := range want {
				got, err := tr.Translate(va)
				require.NoError(t, err, "%#x", va)
				assert.Equal(t, pa, got, "%#x", va)
				got, err = x.walk(va)
				require.NoError(t, err, "walk %#x", va)
				assert.Equal(t, pa, got, "walk %#x", va)
			}
			// Unmapped: a pgd entry (short) or pmd entry (LPAE) that is
			// zero, and a pte that is zero.
			_, err := tr.Translate(0xe0000000)
			assert.ErrorIs(t, err, ErrNotMapped)
			walkFault(t, err, 0xe0000000, map[bool]string{false: "pgd", true: "pmd"}[c.lpae])
			_, err = tr.Translate(mod + 0x5000)
			assert.ErrorIs(t, err, ErrNotMapped)
			walkFault(t, err, mod+0x5000, "pte")
			_, err = tr.Translate(1 << 32)
			assert.ErrorIs(t, err, ErrNotMapped)
			errshape.Require(t, err, "0x100000000")

			// Mapped lists the module pages, merged where adjacent.
			var runs [][2]uint64
			require.NoError(t, x.Mapped(mod, c.po, func(s, e uint64) bool {
				runs = append(runs, [2]uint64{s, e})
				return true
			}))
			if c.lpae {
				assert.Equal(t, [][2]uint64{{mod, mod + 0x1000}, {mod + 0x21000, mod + 0x22000}}, runs)
			} else {
				assert.Equal(t, [][2]uint64{{mod, mod + 0x1000}, {mod + 0x20000, mod + 0x30000}}, runs)
			}
		})
	}
	t.Run("missing tables", func(t *testing.T) {
		f := newARMFixture(t, true, 0xC0000000, 0x40000000)
		tr := f.new(t, true)
		delete(f.m.pages, (f.root+0x1000*3)>>12) // the pmd table of 0x80000000..
		tr.(*translator).flush()
		_, err := tr.Translate(0xbf000000)
		ee := walkFault(t, err, 0xbf000000, "pmd")
		assert.False(t, ee.Read)
	})
	t.Run("unconfirmed", func(t *testing.T) {
		tr, err := New(Config{Arch: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4},
			Info: info(t, "SYMBOL(swapper_pg_dir)=c0004000", "SYMBOL(init_uts_ns)=c1800000"), Phys: newPhysMem(4096)})
		require.NoError(t, err)
		assert.Equal(t, uint64(0xC0000000), tr.Layout().DirectMap)
		assert.NotEmpty(t, tr.Layout().Notes)
		pa, err := tr.Translate(0xc0004010)
		require.NoError(t, err)
		assert.Equal(t, uint64(0x40004010), pa)
	})
	t.Run("errors", func(t *testing.T) {
		_, err := New(Config{Arch: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, Phys: newPhysMem(4096)})
		requireMissing(t, err, "arm", "")
		_, err = New(Config{Arch: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, Info: info(t, "PAGESIZE=4096"), Phys: newPhysMem(4096)})
		requireMissing(t, err, "arm", "SYMBOL(swapper_pg_dir)")
		_, err = New(Config{Arch: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: info(t, "SYMBOL(swapper_pg_dir)=c0004000"), Phys: newPhysMem(4096)})
		requireUnsupported(t, err, UnsupportedError{Arch: "arm", What: "pointer size", Val: 8})
	})
}
