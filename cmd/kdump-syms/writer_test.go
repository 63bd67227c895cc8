package main

import (
	"bytes"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
