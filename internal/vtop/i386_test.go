package vtop

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestI386(t *testing.T) {
	for _, c := range []struct {
		name string
		pae  bool
		po   uint64
	}{
		{"non-PAE", false, 0xC0000000},
		{"PAE", true, 0xC0000000},
		{"non-PAE 2G/2G split", false, 0x80000000},
		{"PAE 1G/3G split", true, 0x40000000},
	} {
		t.Run(c.name, func(t *testing.T) {
			bo := binary.LittleEndian
			m := newPhysMem(4096)
			stext := c.po + 0x0e000000 // relocated by KASLR, as on Debian 6.1 686
			swapper := stext + 0x1a00000
			if c.pae {
				swapper += 0x20 // a PAE PDPT is only 32-byte aligned
			}
			root := swapper - c.po
			vm := uint64(0xf8123000) // a vmalloc/module page
			if !c.pae {
				m.page(root >> 12)
				// Lowmem 0..1 GiB-ish with 4 MiB pages, except the first 4 MiB
				// with a page table (entry 1 maps 0x1000, docs/formats.md §4.3).
				pt := m.alloc()
				for i := range uint64(1024) {
					m.put32(bo, pt+i*4, uint32(i<<12|x86Present))
				}
				m.put32(bo, root+(c.po>>22)*4, uint32(pt|x86Present))
				for va := c.po + 4<<20; va < c.po+0x30000000; va += 4 << 20 {
					m.put32(bo, root+(va>>22)*4, uint32((va-c.po)|x86Present|x86PSE))
				}
				pt2 := m.alloc()
				m.put32(bo, root+(vm>>22)*4, uint32(pt2|x86Present))
				m.put32(bo, pt2+(vm>>12&1023)*4, 0x3456_7000|x86Present)
			} else {
				m.page(root >> 12)
				pmds := map[uint64]uint64{}
				pmdOf := func(va uint64) uint64 {
					i := va >> 30
					if pmds[i] == 0 {
						pmds[i] = m.alloc()
						m.put64(bo, root+i*8, pmds[i]|x86Present)
					}
					return pmds[i]
				}
				pt := m.alloc()
				for i := range uint64(512) {
					m.put64(bo, pt+i*8, i<<12|x86Present)
				}
				m.put64(bo, pmdOf(c.po)+(c.po>>21&511)*8, pt|x86Present)
				for va := c.po + 2<<20; va < c.po+0x30000000; va += 2 << 20 {
					m.put64(bo, pmdOf(va)+(va>>21&511)*8, (va-c.po)|x86Present|x86PSE|1<<63)
				}
				pt2 := m.alloc()
				m.put64(bo, pmdOf(vm)+(vm>>21&511)*8, pt2|x86Present)
				m.put64(bo, pt2+(vm>>12&511)*8, 0x3_3456_7000|x86Present|1<<63) // above 4 GiB
			}
			lines := []string{"SYMBOL(swapper_pg_dir)=" + hexs(swapper), "SYMBOL(_stext)=" + hexs(stext), "PAGESIZE=4096"}
			if c.pae {
				lines = append(lines, "CONFIG_X86_PAE=y")
			}
			tr, err := New(Config{Arch: "i386", Target: memory.Target{ByteOrder: bo, PtrSize: 4, PageSize: 4096}, Info: info(t, lines...), Phys: m})
			require.NoError(t, err)
			l := tr.Layout()
			assert.Equal(t, c.po, l.DirectMap)
			assert.Equal(t, "page tables", l.DirectMapSource)
			assert.Equal(t, map[bool]int{false: 2, true: 3}[c.pae], l.Levels)
			wantVM := uint64(0x3456_7abc)
			if c.pae {
				wantVM = 0x3_3456_7abc
			}
			x := tr.(*translator)
			for va, want := range map[uint64]uint64{
				stext:            0x0e000000,
				swapper:          root,
				c.po + 0x1234:    0x1234,
				c.po + 0x1234567: 0x1234567,
				vm + 0xabc:       wantVM,
			} {
				pa, err := tr.Translate(va)
				require.NoError(t, err, "%#x", va)
				assert.Equal(t, want, pa, "%#x", va)
				pa, err = x.walk(va)
				require.NoError(t, err, "walk %#x", va)
				assert.Equal(t, want, pa, "walk %#x", va)
			}
			_, err = tr.Translate(0xfff00000)
			assert.ErrorIs(t, err, ErrNotMapped)
			errshape.Require(t, err, "0xfff00000")
			_, err = tr.Translate(1 << 32)
			assert.ErrorIs(t, err, ErrNotMapped)
			errshape.Require(t, err, "0x100000000")
		})
	}
	t.Run("unconfirmed", func(t *testing.T) {
		tr, err := New(Config{Arch: "i386", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, Info: info(t, "SYMBOL(swapper_pg_dir)=c1a00000", "SYMBOL(init_uts_ns)=c1800000"), Phys: newPhysMem(4096)})
		require.NoError(t, err)
		assert.Equal(t, uint64(0xC0000000), tr.Layout().DirectMap)
		assert.NotEmpty(t, tr.Layout().Notes)
		pa, err := tr.Translate(0xc1a00010)
		require.NoError(t, err)
		assert.Equal(t, uint64(0x01a00010), pa)
	})
}
