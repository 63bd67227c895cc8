package symfinder

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSystemMapRoundTrip: the System.map written from a kernel's symbols
// at a KASLR offset reads back, with that offset, at the runtime
// addresses: core kernel only, sorted, absolute symbols unshifted.
func TestSystemMapRoundTrip(t *testing.T) {
	const slide = 0x2c000000
	syms := []Symbol{
		{Name: "_text", Addr: 0xffffffff81000000 + slide, Kind: 'T'},
		{Name: "fixed_percpu_data", Addr: 0, Kind: 'A'},
		{Name: "vfs_write", Addr: 0xffffffff81300000 + slide, Kind: 'T'},
		{Name: "xfs_fn", Addr: 0xffffffffc0a00000, Kind: 't', Module: "xfs"},
		{Name: "_stext", Addr: 0xffffffff81000000 + slide, Kind: 'T'},
	}
	var b strings.Builder
	require.NoError(t, WriteSystemMap(&b, syms, slide, 8))
	assert.Equal(t, "0000000000000000 A fixed_percpu_data\nffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff81300000 T vfs_write\n", b.String())
	assert.Equal(t, uint64(0xffffffff81300000+slide), syms[2].Addr, "syms is left as it was")
	f, err := ParseSystemMap(strings.NewReader(b.String()), "system.map", slide)
	require.NoError(t, err)
	var got []string
	_ = f.Find(Query{Kind: All}, func(s Symbol) bool {
		got = append(got, s.Name)
		if s.Name == "vfs_write" {
			assert.Equal(t, syms[2].Addr, s.Addr)
		}
		return true
	})
	assert.ElementsMatch(t, []string{"fixed_percpu_data", "_text", "_stext", "vfs_write"}, got)
}
