package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testChain(t *testing.T) *symfinder.Chain {
	t.Helper()
	b := symfinder.NewBuilder("vmlinux", "")
	b.AddString(0xffffffff81000000, 'T', "_stext")
	b.AddString(0xffffffff8110a2a0, 'T', "do_sys_open")
	b.AddString(0xffffffff8110a300, 't', "next_fn")
	b.SetDerivedEnd(0xffffffff82000000)
	vm, err := b.Build()
	require.NoError(t, err)
	m := symfinder.NewBuilder("module:xfs", "xfs")
	m.AddSized(0xffffffffc0a1b2b0, 0x80, 't', []byte("xfs_foo"))
	mod, err := m.Build()
	require.NoError(t, err)
	c, err := symfinder.NewChain(vm, mod)
	require.NoError(t, err)
	return c
}

func TestSymbolizeText(t *testing.T) {
	in := strings.Join([]string{
		"RIP: 0010:ffffffff8110a2b4 Code: 48 89",
		"RAX: 0000000000000000 RBX: ffffffffc0a1b2c4 RCX: 0xffffffff8110a2a0",
		"Call Trace:",
		" [<ffffffffc0a1b2c4>] ? xfs_whatever",
		" [<ffffffff8110a2b4>]",
		"not an address: deadbeefffffffff81 xffffffff8110a2b4 ffffffffc0a1b2c4z",
		"unknown: ffffffff90000000",
		"no newline at end ffffffff8110a300",
	}, "\n")
	var out bytes.Buffer
	res, unres, err := symbolizeText(strings.NewReader(in), &out, testChain(t), 16, 1<<63)
	require.NoError(t, err)
	want := strings.Join([]string{
		"RIP: 0010:ffffffff8110a2b4 do_sys_open+0x14/0x60 Code: 48 89",
		"RAX: 0000000000000000 RBX: ffffffffc0a1b2c4 xfs_foo+0x14/0x80 [xfs] RCX: 0xffffffff8110a2a0 do_sys_open+0x0/0x60",
		"Call Trace:",
		" [<ffffffffc0a1b2c4>] xfs_foo+0x14/0x80 [xfs] ? xfs_whatever",
		" [<ffffffff8110a2b4>] do_sys_open+0x14/0x60",
		"not an address: deadbeefffffffff81 xffffffff8110a2b4 ffffffffc0a1b2c4z",
		"unknown: ffffffff90000000",
		"no newline at end ffffffff8110a300 next_fn+0x0/0xef5d00",
	}, "\n")
	assert.Equal(t, want, out.String())
	assert.Equal(t, 6, res)
	assert.Equal(t, 1, unres) // ffffffff90000000 lies past the derived end
}

func TestSymbolWriterFormats(t *testing.T) {
	syms := []symfinder.Symbol{
		{Name: "_stext", Addr: 0xffffffff81000000, Kind: 'T', Size: 16, SizeDerived: true},
		{Name: "xfs_foo", Addr: 0xffffffffc0a1b2b0, Kind: 't', Size: 0x80, Module: "xfs"},
		{Name: `odd,"name`, Addr: 0xc0001000, Kind: 'd'},
	}
	for _, tc := range []struct {
		format string
		ptr    int
		want   string
	}{
		{"kallsyms", 8, "ffffffff81000000 T _stext\nffffffffc0a1b2b0 t xfs_foo\t[xfs]\n00000000c0001000 d odd,\"name\n"},
		{"kallsyms", 4, "ffffffff81000000 T _stext\nffffffffc0a1b2b0 t xfs_foo\t[xfs]\nc0001000 d odd,\"name\n"},
		{"csv", 8, "addr,type,name,size,size_derived,module\nffffffff81000000,T,_stext,16,true,\nffffffffc0a1b2b0,t,xfs_foo,128,false,xfs\n00000000c0001000,d,\"odd,\"\"name\",0,false,\n"},
		{"json", 8, `{"addr":"ffffffff81000000","type":"T","name":"_stext","size":16,"size_derived":true}` + "\n" +
			`{"addr":"ffffffffc0a1b2b0","type":"t","name":"xfs_foo","size":128,"module":"xfs"}` + "\n" +
			`{"addr":"00000000c0001000","type":"d","name":"odd,\"name","size":0}` + "\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var out bytes.Buffer
			sw, err := newSymbolWriter(&out, tc.format, tc.ptr)
			require.NoError(t, err)
			for _, s := range syms {
				require.NoError(t, sw.write(s))
			}
			require.NoError(t, sw.flush())
			assert.Equal(t, tc.want, out.String())
		})
	}
	_, err := newSymbolWriter(nil, "xml", 8)
	assert.Error(t, err)
}
