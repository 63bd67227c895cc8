package symfinder

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSystemMap(t *testing.T) {
	text, err := os.ReadFile("testdata/System.map")
	require.NoError(t, err)
	const slide = 0x1e000000
	for _, tc := range []struct {
		name  string
		slide uint64
	}{{"no slide", 0}, {"kaslr", slide}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseSystemMap(bytes.NewReader(text), "System.map", tc.slide)
			require.NoError(t, err)

			// All keeps the file order; only image symbols move.
			lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
			all := collect(f, Query{Kind: All})
			require.Len(t, all, len(lines))
			for i, s := range all {
				orig, msg := parseSymLine([]byte(lines[i]), false)
				require.Empty(t, msg)
				want := orig.addr
				if orig.addr >= 0xffffffff80000000 {
					want += tc.slide
				}
				assert.Equal(t, string(orig.name), s.Name)
				assert.Equal(t, want, s.Addr, s.Name)
			}

			s := collect(f, Query{Kind: ByName, Name: "startup_64"})
			require.Len(t, s, 1)
			assert.Equal(t, 0xffffffff81000000+tc.slide, s[0].Addr)
			hits := collect(f, Query{Kind: ByAddr, Addr: 0xffffffff81000010 + tc.slide})
			assert.Equal(t, []string{"_stext", "_text", "startup_64"}, names(hits))
			assert.EqualValues(t, 0x70, hits[0].Size)
			// Per-CPU offsets are no addresses the kernel resolves; their
			// sizes end with the per-CPU area.
			hits = collect(f, Query{Kind: ByAddr, Addr: 0x1010})
			assert.Empty(t, hits)
			s = collect(f, Query{Kind: ByName, Name: "irq_stack_backing_store"})
			require.Len(t, s, 1)
			assert.EqualValues(t, 0x2b000, s[0].Size)
			s = collect(f, Query{Kind: ByName, Name: "__per_cpu_end"})
			require.Len(t, s, 1)
			assert.EqualValues(t, 0, s[0].Size)
			hits = collect(f, Query{Kind: ByAddr, Addr: 0xffffffff82a00110 + tc.slide})
			require.NotEmpty(t, hits)
			assert.Equal(t, "bss_local+0x10/0xfff00", hits[0].Format(0xffffffff82a00110+tc.slide))
			assert.Empty(t, collect(f, Query{Kind: ByAddr, Addr: 0xffffffff82b00000 + tc.slide}), "_end is past the range")
			// The image's symbols never reach down to the per-CPU ones.
			hits = collect(f, Query{Kind: ByAddr, Addr: 0xffffffff80000000})
			assert.Empty(t, hits)
			s = collect(f, Query{Kind: ByName, Name: "phys_startup_64"})
			require.Len(t, s, 1)
			assert.EqualValues(t, 0x1000000, s[0].Addr)
		})
	}
}

func TestParseSystemMapEdges(t *testing.T) {
	// No per-CPU or absolute symbols: the raw index is kept, shifted.
	f, err := ParseSystemMap(strings.NewReader("c1000000 T _text\nc1000100 t x\n"), "m", 0x40000000)
	require.NoError(t, err)
	require.Len(t, f.Indexes(), 1)
	s := collect(f, Query{Kind: All})
	require.Len(t, s, 2)
	assert.EqualValues(t, 0x01000000, s[0].Addr, "32-bit addresses wrap at 32 bits")

	// nm's undefined lines are skipped; other address-less lines are not.
	f, err = ParseSystemMap(strings.NewReader("                 U printk\nffffffff81000000 T _text\n                 w weak_undef\n"), "m", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, f.Len())
	_, err = ParseSystemMap(strings.NewReader("ffffffff81000000 T _text\n                 T oops\n"), "m", 0)
	var le *LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 2, le.Num)
	assert.Equal(t, "m", le.File)
	errshape.Require(t, err, "symfinder: m: ") // one line, naming the file and the line

	// System.map has no module column.
	_, err = ParseSystemMap(strings.NewReader("ffffffff81000000 T a\t[m]\n"), "m", 0)
	assert.ErrorIs(t, err, ErrCorrupt)
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 1, le.Num)
	errshape.Require(t, err, "symfinder: m: ")

	// Without a text symbol everything that is not absolute moves.
	f, err = ParseSystemMap(strings.NewReader("0000000000001000 D d\n0000000000002000 A a\n"), "m", 0x100)
	require.NoError(t, err)
	assert.Equal(t, []uint64{0x1100, 0x2000}, []uint64{collect(f, Query{Kind: All})[0].Addr, collect(f, Query{Kind: All})[1].Addr})

	f, err = ParseSystemMap(strings.NewReader(""), "m", 5)
	require.NoError(t, err)
	assert.Zero(t, f.Len())
}
