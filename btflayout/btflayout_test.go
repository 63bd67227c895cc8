package btflayout

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

const sampleTable = `
# sample
sizeof(module) = 0x300
module.state = 0:4
module.list = 8:16
module.name = 24:56
module.mem = 320:112:7   # array
enum(mod_mem_type).MOD_TEXT = 0
enum(mod_mem_type).MOD_DATA = 1
`

func TestTable(t *testing.T) {
	tab, err := ParseTable(strings.NewReader(sampleTable), "sample")
	require.NoError(t, err)
	s, err := tab.Struct("module", "list", "name")
	require.NoError(t, err)
	assert.Equal(t, uint64(0x300), s.Size)
	f, ok := s.Field("mem")
	require.True(t, ok)
	assert.Equal(t, Field{Name: "mem", Offset: 320, Size: 112, Count: 7, ElemSize: 16, Kind: KindArray}, f)
	_, err = tab.Struct("module", "kallsyms")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = tab.Struct("nope")
	assert.ErrorIs(t, err, ErrNotFound)
	e, err := tab.Enum("mod_mem_type")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"MOD_TEXT": 0, "MOD_DATA": 1}, e)

	// WriteTable round-trips.
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, tab, Want{Structs: map[string][]string{"module": {"state", "list", "name", "mem", "missing"}}, Enums: []string{"mod_mem_type"}}))
	tab2, err := ParseTable(&buf, "again")
	require.NoError(t, err)
	s2, err := tab2.Struct("module")
	require.NoError(t, err)
	assert.Equal(t, s.Fields(), s2.Fields())
	assert.Equal(t, s.Size, s2.Size)
}

func TestTableErrors(t *testing.T) {
	for _, bad := range []string{
		"module.list",
		"module = 3",
		"module.list = x",
		"module.list = 1:2:3:4",
		"sizeof(mod ule) = 3",
		"enum(x) = 1",
		"module.list = 1\nmodule.list = 2",
		"1module.x = 0",
	} {
		_, err := ParseTable(strings.NewReader(bad), "bad")
		assert.ErrorIs(t, err, ErrCorrupt, "%q", bad)
		assert.Contains(t, err.Error(), "bad:")
	}
}

func TestDWARF(t *testing.T) {
	src, err := Open("testdata/module.o")
	require.NoError(t, err)
	assert.Contains(t, src.Describe(), "DWARF")
	s, err := src.Struct("module", "mem", "kallsyms")
	require.NoError(t, err)
	assert.Equal(t, uint64(184), s.Size)
	want := map[string]Field{
		"state":         {Name: "state", Offset: 0, Size: 4, Kind: KindInt},
		"list":          {Name: "list", Offset: 8, Size: 16, Kind: KindStruct, TypeName: "list_head"},
		"name":          {Name: "name", Offset: 24, Size: 56, Kind: KindArray, TypeName: "char", Count: 56, ElemSize: 1},
		"anon_a":        {Name: "anon_a", Offset: 80, Size: 8, Kind: KindInt},
		"anon_c":        {Name: "anon_c", Offset: 84, Size: 4, Kind: KindInt},
		"mem":           {Name: "mem", Offset: 96, Size: 48, Kind: KindArray, TypeName: "module_memory", Count: 3, ElemSize: 16},
		"kallsyms":      {Name: "kallsyms", Offset: 144, Size: 8, Kind: KindPointer, TypeName: "mod_kallsyms"},
		"core_kallsyms": {Name: "core_kallsyms", Offset: 152, Size: 32, Kind: KindStruct, TypeName: "mod_kallsyms"},
	}
	for n, w := range want {
		f, ok := s.Field(n)
		require.True(t, ok, n)
		assert.Equal(t, w, f, n)
	}
	fy, ok := s.Field("flag_y")
	require.True(t, ok)
	assert.Equal(t, uint64(88*8+3), fy.BitOffset)
	assert.Equal(t, uint64(5), fy.BitSize)
	mk, err := src.Struct("mod_kallsyms")
	require.NoError(t, err)
	f, _ := mk.Field("symtab")
	assert.Equal(t, "", f.TypeName, "typedef of an anonymous struct")
	e, err := src.Enum("mod_mem_type")
	require.NoError(t, err)
	assert.Equal(t, int64(1), e["MOD_DATA"])
	_, err = src.Struct("absent")
	assert.ErrorIs(t, err, ErrNotFound)
}

// hostBTF returns this machine's vmlinux BTF, a real blob to test and
// benchmark with; the test skips without it.
func hostBTF(tb testing.TB) []byte {
	raw, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil || len(raw) == 0 {
		tb.Skipf("no /sys/kernel/btf/vmlinux on this machine: %v", err)
	}
	return raw
}

// flatMem is kernel memory holding one blob at base.
type flatMem struct {
	base uint64
	b    []byte
}

func (m flatMem) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < m.base || addr-m.base >= uint64(len(m.b)) {
		return 0, memory.Fault(addr, "", "", memory.ErrNotSaved)
	}
	n := copy(p, m.b[addr-m.base:])
	if n < len(p) {
		return n, memory.Fault(addr+uint64(n), "", "", memory.ErrNotSaved)
	}
	return n, nil
}

func TestBTFHost(t *testing.T) {
	raw := hostBTF(t)
	const base = 0xffffffff82000000
	b, err := FromMemory(flatMem{base, raw}, base, base+uint64(len(raw)))
	require.NoError(t, err)
	s, err := b.Struct("module", "list", "name", "state")
	require.NoError(t, err)
	f, _ := s.Field("name")
	assert.Equal(t, KindArray, f.Kind)
	assert.Equal(t, uint64(64-8), f.Count)
	lh, err := b.Struct("list_head")
	require.NoError(t, err)
	assert.Equal(t, uint64(16), lh.Size)

	// A truncated dump: the blob's tail is not saved.
	_, err = FromMemory(flatMem{base, raw[:len(raw)/2]}, base, base+uint64(len(raw)))
	assert.ErrorIs(t, err, memory.ErrNotSaved)
}

func TestFromMemoryErrors(t *testing.T) {
	good := make([]byte, 64)
	copy(good, []byte{0x9f, 0xeb, 1, 0, 24, 0, 0, 0})
	for _, c := range []struct {
		name        string
		mem         memory.Reader
		start, stop uint64
		want        error
	}{
		{"no symbols", flatMem{0x1000, good}, 0, 0, ErrNoBTF},
		{"inverted", flatMem{0x1000, good}, 0x2000, 0x1000, ErrCorrupt},
		{"huge", flatMem{0x1000, good}, 0x1000, 0x1000 + MaxBTFSize + 1, ErrCorrupt},
		{"bad magic", flatMem{0x1000, make([]byte, 64)}, 0x1000, 0x1040, ErrCorrupt},
		{"unsaved", flatMem{0x9000, good}, 0x1000, 0x1040, memory.ErrNotSaved},
		{"header beyond section", flatMem{0x1000, append(append([]byte{}, good[:16]...), 0xff, 0xff, 0, 0, 0, 0, 0, 0)}, 0x1000, 0x1040, ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := FromMemory(c.mem, c.start, c.stop)
			assert.Nil(t, b)
			assert.ErrorIs(t, err, c.want)
		})
	}
	_, err := ParseBTF(good[:10], "short")
	assert.True(t, errors.Is(err, ErrCorrupt))
}

// BenchmarkBTFLayouts measures what modsyms pays on first use: read the
// vmlinux BTF out of (here, flat) memory, parse it, and resolve the structs
// modsyms needs.
func BenchmarkBTFLayouts(b *testing.B) {
	raw := hostBTF(b)
	const base = 0xffffffff82000000
	mem := flatMem{base, raw}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		src, err := FromMemory(mem, base, base+uint64(len(raw)))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []string{"module", "mod_kallsyms", "module_memory", "list_head"} {
			if _, err := src.Struct(n); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := src.Enum("mod_mem_type"); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseTable(f *testing.F) {
	f.Add([]byte(sampleTable))
	f.Add([]byte("sizeof(a)=1\na.b=0x10:8:2\nenum(e).X=-1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseTable(bytes.NewReader(data), "fuzz")
		if err != nil {
			if tab != nil {
				t.Fatal("error with a table")
			}
			return
		}
		var buf bytes.Buffer
		want := Want{Structs: map[string][]string{}}
		for n, s := range tab.structs {
			for _, fl := range s.fields {
				want.Structs[n] = append(want.Structs[n], fl.Name)
			}
		}
		if err := WriteTable(&buf, tab, want); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseTable(&buf, "again"); err != nil {
			t.Fatalf("written table does not parse: %v\n%s", err, buf.String())
		}
	})
}

func FuzzParseBTF(f *testing.F) {
	f.Add([]byte{0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBTF(data, "fuzz")
		if err != nil {
			if b != nil {
				t.Fatal("error with a result")
			}
			return
		}
		_, _ = b.Struct("module", "list")
		_, _ = b.Enum("mod_mem_type")
	})
}
