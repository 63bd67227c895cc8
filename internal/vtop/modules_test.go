package vtop

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPPC64ModuleAreas: Book3S-64 allocates modules from VMALLOC_START up;
// without NUMBER(VMALLOC_START) (before v6.9) the start is the MMU's
// KERN_VIRT_START for its page size.
func TestPPC64ModuleAreas(t *testing.T) {
	const window = 2 << 30
	for _, c := range []struct {
		name     string
		pageSize int
		radix    string
		geo      ppcGeometry
		extra    []string
		want     [][2]uint64
	}{
		{"radix-4k, VMALLOC_START", 4096, "1", ppcRadix4K, []string{"NUMBER(VMALLOC_START)=0xc008000000000000"},
			[][2]uint64{{0xc008000000000000, 0xc008000000000000 + window}}},
		{"hash-4k, VMALLOC_START", 4096, "0", ppcHash4K, []string{"NUMBER(VMALLOC_START)=0xc0003d0000000000"},
			[][2]uint64{{0xc0003d0000000000, 0xc0003d0000000000 + window}}},
		// 6.1 prints neither VMALLOC_START nor (deb12-6.1-ppc64el) RADIX_MMU.
		{"radix-64k, 6.1", 65536, "1", ppcRadix64K, nil, [][2]uint64{{0xc008000000000000, 0xc008000000000000 + window}}},
		{"hash-64k, 6.1", 65536, "0", ppcHash64K, nil, [][2]uint64{{0xc008000000000000, 0xc008000000000000 + window}}},
		{"radix-4k, 6.1", 4096, "1", ppcRadix4K, nil, [][2]uint64{{0xc008000000000000, 0xc008000000000000 + window}}},
		{"hash-4k, 6.1", 4096, "0", ppcHash4K, nil,
			[][2]uint64{{0xc0003d0000000000, 0xc0003d0000000000 + window}, {0xc000100000000000, 0xc000100000000000 + window}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newPhysMem(4096)
			newPPCBuilder(m, pageShiftOf(uint64(c.pageSize)), c.geo)
			tr := newPPCTranslator(t, m, ppcInfo(t, c.pageSize, c.radix, c.extra...))
			assert.Equal(t, c.want, tr.Layout().Modules)
			assert.Contains(t, tr.Describe(), "module area: [")
		})
	}
	t.Run("no swapper_pg_dir", func(t *testing.T) {
		m := newPhysMem(4096)
		tr, err := New(Config{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8},
			Info: info(t, "PAGESIZE=65536", "SYMBOL(_stext)=c000000000000000"), Phys: m})
		require.NoError(t, err)
		assert.Equal(t, [][2]uint64{{0xc008000000000000, 0xc008000000000000 + window}}, tr.Layout().Modules)
	})
}

// TestS390XModuleAreas: before v6.10 the module area is the top 2 GiB of
// the address space swapper_pg_dir spans (less the absolute lowcore);
// from v6.10 (KERNELOFFPHYS) the 2 GiB below the kernel image.
func TestS390XModuleAreas(t *testing.T) {
	for _, c := range []struct {
		top  int
		want [][2]uint64
	}{
		{s390RegionThird, [][2]uint64{{1<<42 - 1<<31 - 16<<20, 1 << 42}}},
		{s390RegionSecond, [][2]uint64{{1<<53 - 1<<31 - 16<<20, 1 << 53}}},
		// A region-first table: KASAN (its shadow lies above the module
		// area), where the top of the address space says nothing.
		{s390RegionFirst, nil},
	} {
		t.Run(s390Levels[c.top], func(t *testing.T) {
			m := newPhysMem(4096)
			m.put64(binary.BigEndian, s390HighMe, 0x10000000)
			b := newS390Builder(m, s390Root, c.top)
			for pa := uint64(0); pa < 0x10000000; pa += 1 << 20 {
				b.mapPage(pa, pa, 20)
			}
			tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: m})
			require.NoError(t, err)
			assert.Equal(t, c.want, tr.Layout().Modules)
		})
	}
	t.Run("no swapper_pg_dir", func(t *testing.T) {
		m := newPhysMem(4096)
		tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8},
			Info: info(t, "SYMBOL(_stext)=100000", "KERNELOFFSET=0"), Phys: m})
		require.NoError(t, err)
		assert.Nil(t, tr.Layout().Modules)
	})
	// deb13-6.12-s390x: KERNELOFFSET 0x3fffe7f8000, so MODULES_END
	// 0x3fffe700000 and MODULES_VADDR 2 GiB below.
	assert.Equal(t, [][2]uint64{{0x3ff7e700000, 0x3fffe700000}}, s390ModulesBelowImage(0x3fffe7f8000))
	assert.Nil(t, s390ModulesBelowImage(0x7ff00000))
	assert.Nil(t, s390ModulesAtTop(s390Segment))
}
