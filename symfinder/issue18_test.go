package symfinder

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIssue18 is the issue's report: from a saved /proc/kallsyms, an
// address no symbol covers (stack, direct map, vmalloc, user space, zero)
// resolved to __per_cpu_end+huge/huge, and a module's absolute per-CPU
// symbol got a size of about 2^64, swallowing the addresses of the
// modules after it; a finder added after the file never got its turn.
func TestIssue18(t *testing.T) {
	const text = "0000000000000000 A __per_cpu_start\n" +
		"0000000000039000 A __per_cpu_end\n" +
		"ffffffffb8600000 T _stext\n" +
		"ffffffffb8600010 T start_kernel\n" +
		"ffffffffb9600000 T _etext\n" +
		"ffffffffbb230000 B _end\n" +
		"0000000000039000 a discard_pa_seq\t[ext4]\n" +
		"ffffffffc09d3000 t ext4_fill_super\t[ext4]\n" +
		"ffffffffc09d3800 t ext4_put_super\t[ext4]\n" +
		"ffffffffc09cd000 t crc16\t[crc16]\n" +
		"ffffffffc09cd100 T crc16_table\t[crc16]\n"
	f, err := ParseKallsyms(strings.NewReader(text), "kallsyms-file")
	require.NoError(t, err)
	mine := FinderFunc{FinderName: "mine", Func: func(q Query, yield func(Symbol) bool) error {
		if q.Kind == ByAddr {
			yield(Symbol{Name: "mine", Addr: q.Addr, Size: 1, Kind: 'd'})
		}
		return nil
	}}
	c, err := NewChain(f, mine)
	require.NoError(t, err)
	for _, a := range []uint64{0, 0x1000, 0x7ffd12345678, 0xffff888003a8c000, 0xffffc90000003e38, 0xffffffffbb230000, 0xffffffffc09cc000} {
		s, err := c.Lookup(a)
		require.NoError(t, err)
		assert.Equal(t, "mine", s.Name, "%#x is in no kernel symbol", a)
	}
	ps, err := c.LookupName("discard_pa_seq")
	require.NoError(t, err)
	assert.Zero(t, ps.Size, "a module's per-CPU symbol has no size, not 2^64")
	s, err := c.Lookup(0xffffffffc09cd004)
	require.NoError(t, err)
	assert.Equal(t, "crc16+0x4/0x100 [crc16]", s.Format(0xffffffffc09cd004))
	// A module's highest symbol in a file has no known end.
	s, err = c.Lookup(0xffffffffc09d3800)
	require.NoError(t, err)
	assert.Equal(t, "ext4_put_super+0x0/0x0 [ext4]", s.Format(0xffffffffc09d3800))
	s, err = c.Lookup(0xffffffffc09d3804)
	require.NoError(t, err)
	assert.Equal(t, "mine", s.Name)
}
