package vmcoreinfo

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is shaped after a Debian 6.1 amd64 note (docs/formats.md §2.2–2.5).
const sample = "OSRELEASE=6.1.0-18-amd64\n" +
	"BUILD-ID=5f0c0a1c2b7b3ed0ec5cdd0d2a68a84aa8d2c1b2\n" +
	"PAGESIZE=4096\n" +
	"SYMBOL(init_uts_ns)=ffffffff98e15e00\n" +
	"OFFSET(uts_namespace.name)=4\n" +
	"SYMBOL(_stext)=ffffffff97200000\n" +
	"NUMBER(VMALLOC_START)=0xffffcdf400000000\n" +
	"SIZE(list_head)=16\n" +
	"LENGTH(mem_section)=2048\n" +
	"NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)=-129\n" +
	"SYMBOL(kallsyms_names)=ffffffff98123450\n" +
	"CONFIG_NUMA=y\n" +
	"SOMETHING_NEW=whatever\n" +
	"KERNELOFFSET=16200000\n" +
	"NUMBER(phys_base)=-260046848\n" +
	"SYMBOL(init_top_pgt)=ffffffff98a0a000"

func TestParse(t *testing.T) {
	in, err := Parse(append([]byte(sample), 0, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, "6.1.0-18-amd64", in.OSRelease())
	ps, ok := in.PageSize()
	assert.True(t, ok)
	assert.EqualValues(t, 4096, ps)
	v, ok := in.Symbol("_stext")
	assert.True(t, ok)
	assert.EqualValues(t, uint64(0xffffffff97200000), v)
	v, _ = in.Number("VMALLOC_START")
	assert.EqualValues(t, uint64(0xffffcdf400000000), v)
	v, _ = in.Number("phys_base")
	assert.EqualValues(t, -260046848, int64(v))
	v, _ = in.Number("PAGE_BUDDY_MAPCOUNT_VALUE")
	assert.EqualValues(t, -129, int64(v))
	v, _ = in.Offset("uts_namespace", "name")
	assert.EqualValues(t, 4, v)
	v, _ = in.Size("list_head")
	assert.EqualValues(t, 16, v)
	v, _ = in.Length("mem_section")
	assert.EqualValues(t, 2048, v)
	v, _ = in.KernelOffset()
	assert.EqualValues(t, 0x16200000, v)
	assert.True(t, in.Config("NUMA"))
	assert.False(t, in.Config("X86_PAE"))
	_, ok = in.CrashTime()
	assert.False(t, ok)
	s, ok := in.Get("SOMETHING_NEW")
	assert.True(t, ok)
	assert.Equal(t, "whatever", s)
	assert.Equal(t, "x86_64", in.Arch())
	for text, want := range map[string]string{
		"NUMBER(VA_BITS)=48\nNUMBER(kimage_voffset)=0xffff800000000000\n":      "arm64",
		"NUMBER(VA_BITS)=57\nNUMBER(phys_ram_base)=2147483648\n":               "riscv64",
		"NUMBER(VA_BITS)=39\nNUMBER(va_kernel_pa_offset)=0xfffffffeffe00000\n": "riscv64",
	} {
		ri, err := Parse([]byte("OSRELEASE=6.12.0\n" + text))
		require.NoError(t, err)
		assert.Equal(t, want, ri.Arch(), text)
	}
	arm, err := Parse([]byte("OSRELEASE=6.12.117+deb13-armmp-lpae\nSYMBOL(swapper_pg_dir)=c0203000\nCONFIG_ARM_LPAE=y\n"))
	require.NoError(t, err)
	assert.Equal(t, "arm", arm.Arch())
	assert.Len(t, in.Lines(), 16)
	assert.Equal(t, "OSRELEASE", in.Lines()[0].Key)
	assert.Equal(t, "init_top_pgt", in.Lines()[15].Key[7:19])
	assert.Equal(t, sample, string(in.Raw()))

	_, err = in.Require("_stext", "kallsyms_token_table")
	assert.ErrorIs(t, err, ErrMissingInfo)
}

func TestParseErrors(t *testing.T) {
	for name, text := range map[string]string{
		"bad symbol":     "OSRELEASE=6.1\nSYMBOL(x)=zz\n",
		"bad offset":     "OSRELEASE=6.1\nOFFSET(a.b)=-1\n",
		"bad number":     "OSRELEASE=6.1\nNUMBER(x)=0xg\n",
		"page size":      "OSRELEASE=6.1\nPAGESIZE=3000\n",
		"no osrelease":   "PAGESIZE=4096\n",
		"embedded nul":   "OSRELEASE=6.1\x00\nPAGESIZE=4096\n",
		"kerneloffset":   "OSRELEASE=6.1\nKERNELOFFSET=-5\n",
		"empty":          "",
		"only nul bytes": "\x00\x00\x00",
	} {
		t.Run(name, func(t *testing.T) {
			in, err := Parse([]byte(text))
			require.Error(t, err)
			assert.Nil(t, in)
			assert.ErrorIs(t, err, ErrCorrupt)
		})
	}
	_, err := Parse([]byte("OSRELEASE=6.1\nSYMBOL(x)=zz\n"))
	var le *LineError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, 2, le.Num)
}

func TestParseTolerates(t *testing.T) {
	in, err := Parse([]byte("\nOSRELEASE=5.10.0-28-amd64\r\nno equals sign here\n=nokey\nPAGESIZE=4096"))
	require.NoError(t, err)
	assert.Equal(t, "5.10.0-28-amd64", in.OSRelease())
	ps, _ := in.PageSize()
	assert.EqualValues(t, 4096, ps)
	assert.Len(t, in.Lines(), 2)
	assert.Equal(t, 5, in.Lines()[1].Num)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("OSRELEASE=x\nNUMBER(a)=-0\nSYMBOL(b)=0x10\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := Parse(b)
		if err != nil {
			if in != nil {
				t.Fatal("non-nil Info with error")
			}
			return
		}
		for _, l := range in.Lines() {
			if _, ok := in.Get(l.Key); !ok {
				t.Fatalf("key %q listed but not found", l.Key)
			}
		}
		in.Arch()
		in.Symbol("_stext")
		in.Number("phys_base")
	})
}
