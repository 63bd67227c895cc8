package vtop

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// TestX86_64Mapped lists the mapped runs of a module region with 4 KiB
// pages and a 2 MiB page, merging neighbours, for 4- and 5-level paging.
func TestX86_64Mapped(t *testing.T) {
	for _, levels := range []int{4, 5} {
		f := newX86Fixture(t, levels, 0)
		const mod = 0xffffffffc0000000
		for _, off := range []uint64{0, 0x1000, 0x2000, 0x5000} {
			f.b.mapPage(mod+off, 0x7000000+off, 12)
		}
		f.b.mapPage(mod+0x400000, 0x7400000, 21)
		f.b.mapPage(mod+0x600000, 0x7600000, 12) // right after the 2 MiB page
		tr := f.new(t)
		var got [][2]uint64
		require.NoError(t, tr.(Mapper).Mapped(mod, 0xffffffffff000000, func(s, e uint64) bool {
			got = append(got, [2]uint64{s, e})
			return true
		}))
		assert.Equal(t, [][2]uint64{{mod, mod + 0x3000}, {mod + 0x5000, mod + 0x6000}, {mod + 0x400000, mod + 0x601000}}, got, "%d levels", levels)
		// A range inside a run, and stopping early.
		got = nil
		require.NoError(t, tr.(Mapper).Mapped(mod+0x1800, mod+0x5800, func(s, e uint64) bool {
			got = append(got, [2]uint64{s, e})
			return false
		}))
		assert.Equal(t, [][2]uint64{{mod + 0x1800, mod + 0x3000}}, got) // clipped to the range
		// The kernel image: one run of 2 MiB pages.
		got = nil
		require.NoError(t, tr.(Mapper).Mapped(fxStext, fxStext+64<<20, func(s, e uint64) bool {
			got = append(got, [2]uint64{s, e})
			return true
		}))
		assert.Equal(t, [][2]uint64{{fxStext, fxStext + 64<<20}}, got)
	}
}

// TestS390XMapped lists the mapped runs of s390x vmalloc space through
// each type of swapper_pg_dir: 4 KiB pages, 1 MiB segments and 2 GiB
// region-third frames, merged where they touch; quarters of a table its
// region entry leaves out, entries of the wrong type and addresses beyond
// the top table are unmapped, as for the walk.
func TestS390XMapped(t *testing.T) {
	collect := func(t *testing.T, m Mapper, lo, hi uint64) [][2]uint64 {
		var got [][2]uint64
		require.NoError(t, m.Mapped(lo, hi, func(s, e uint64) bool {
			got = append(got, [2]uint64{s, e})
			return true
		}))
		return got
	}
	for _, top := range []int{s390RegionThird, s390RegionSecond, s390RegionFirst} {
		t.Run(s390Levels[top], func(t *testing.T) {
			m := newPhysMem(4096)
			m.put64(binary.BigEndian, s390HighMe, 0x10000000)
			b := newS390Builder(m, s390Root, top)
			for pa := uint64(0); pa < 0x10000000; pa += 1 << 20 {
				b.mapPage(pa, pa, 20)
			}
			vm := uint64(0x3ff00000000)
			if top >= s390RegionSecond {
				vm = 0x1ff0000000000
			}
			b.mapPage(vm+0x5000, 0x0abcd000, 12)
			b.mapPage(vm+0x6000, 0x00123000, 12)
			b.mapPage(vm+0x9000, 0x00124000, 12)
			b.mapPage(vm+0x100000, 0x0f000000, 20)
			b.mapPage(vm+0x200000, 0x0f200000, 12) // right after the segment
			b.mapPage(vm+0x80000000, 0x80000000, 31)
			tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: m})
			require.NoError(t, err)
			want := [][2]uint64{{vm + 0x5000, vm + 0x7000}, {vm + 0x9000, vm + 0xa000}, {vm + 0x100000, vm + 0x201000}, {vm + 0x80000000, vm + 0x100000000}}
			assert.Equal(t, want, collect(t, tr.(Mapper), vm, vm+1<<32))
			// Every run translates, first and last byte, and the gaps do not.
			x := tr.(*translator)
			for i, r := range want {
				for _, va := range []uint64{r[0], r[1] - 1} {
					_, err := x.walk(va)
					assert.NoError(t, err, "%#x", va)
				}
				if i > 0 {
					_, err := x.walk(want[i-1][1])
					assert.ErrorIs(t, err, ErrNotMapped)
				}
			}
			// The identity map: one run up to the end of memory.
			assert.Equal(t, [][2]uint64{{0, 0x10000000}}, collect(t, tr.(Mapper), 0, 1<<31))
			// Beyond what a region-third or region-second table addresses:
			// nothing, where masking the index would alias vmalloc.
			if top < s390RegionFirst {
				limit := uint64(1) << (s390Shift[top] + 11)
				assert.Empty(t, collect(t, tr.(Mapper), limit+vm, limit+vm+1<<32))
				assert.Equal(t, want[:2], collect(t, tr.(Mapper), vm, vm+0x10000))
			}
		})
	}

	// Region-third table quarters and entry types (TestS390XFaults' cases).
	m := newPhysMem(4096)
	b := newS390Builder(m, s390Root, s390RegionThird)
	b.mapPage(0, 0, 20)
	const va = 0x3ff80005000
	b.mapPage(va, 0x5000, 12)
	tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(t), Phys: m})
	require.NoError(t, err)
	at := uint64(s390Root + (va>>31&2047)*8)
	rte := m.get(binary.BigEndian, 8, at)
	for _, c := range []struct {
		name string
		e    uint64
		want [][2]uint64
	}{
		{"whole segment table", rte, [][2]uint64{{va, va + 0x1000}}},
		{"TL 0: quarter 0 only", rte &^ s390RegionTL, [][2]uint64{{va, va + 0x1000}}},
		{"TF 1, TL 1: quarter 0 missing", rte&^s390RegionTL | 1<<6 | 1, nil},
		{"region-third entry of another type", rte&^s390EntryTypeMask | 2<<2, nil},
		{"next table not in the dump", 0x7f000000 | 1<<2 | 3, nil},
	} {
		m.put64(binary.BigEndian, at, c.e)
		assert.Equal(t, c.want, collect(t, tr.(Mapper), va&^(1<<31-1), va|(1<<31-1)), c.name)
	}
}
