package vtop

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
