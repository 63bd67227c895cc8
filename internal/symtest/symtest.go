// Package symtest holds symbol chains for the tests of the symbolizers.
package symtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// SmallKernelChain is a small kernel for symbolizer tests: vmlinux answering in [_stext, _end), and
// a module xfs with one text region.
func SmallKernelChain(t testing.TB) *symfinder.Chain {
	t.Helper()
	b := symfinder.NewBuilder("vmlinux", "")
	for _, s := range []struct {
		addr uint64
		name string
	}{
		{0xffffffff81000000, "_stext"},
		{0xffffffff8110a2a0, "do_sys_open"},
		{0xffffffff8110a300, "next_fn"},
		{0xffffffff8110a400, "vfs_write"},
		{0xffffffff8110a600, "ksys_write"},
		{0xffffffff8110a700, "do_syscall_64"},
		{0xffffffff8110a800, "dup_name"},
		{0xffffffff8110a900, "dup_name"},
		{0xffffffff8110a980, "_end"},
	} {
		b.AddString(s.addr, 'T', s.name)
	}
	b.SetExtents([]symfinder.Range{{Start: 0xffffffff81000000, End: 0xffffffff8110a980, ToNextSymbol: true}}, nil)
	vm, err := b.Build()
	require.NoError(t, err)
	m := symfinder.NewBuilder("module:xfs", "xfs")
	m.AddSized(0xffffffffc0a1b2b0, 0x80, 't', []byte("xfs_foo"))
	m.AddSized(0xffffffffc0a1b400, 0x80, 't', []byte("xfs_bar"))
	m.AddSized(0xffffffffc0a1b500, 0x80, 't', []byte("xfs_file_write_iter"))
	m.SetExtents([]symfinder.Range{{Start: 0xffffffffc0a1b000, End: 0xffffffffc0a1c000}}, symfinder.SkippedInModuleLookups)
	mod, err := m.Build()
	require.NoError(t, err)
	c, err := symfinder.NewChain(vm, mod)
	require.NoError(t, err)
	return c
}
