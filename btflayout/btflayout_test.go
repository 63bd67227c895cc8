package btflayout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
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
	for _, bad := range []struct {
		text string
		line int
	}{
		{"module.list", 1},
		{"module = 3", 1},
		{"module.list = x", 1},
		{"module.list = 1:2:3:4", 1},
		{"sizeof(mod ule) = 3", 1},
		{"enum(x) = 1", 1},
		{"module.list = 1\nmodule.list = 2", 2},
		{"# comment\n\n1module.x = 0", 3},
	} {
		_, err := ParseTable(strings.NewReader(bad.text), "bad")
		assert.ErrorIs(t, err, ErrCorrupt, "%q", bad.text)
		var le *LineError
		require.ErrorAs(t, err, &le, "%q", bad.text)
		assert.Equal(t, "bad", le.File)
		assert.Equal(t, bad.line, le.Num, "%q", bad.text)
		errshape.Require(t, err, "btflayout: bad: ") // one line, naming the table and the line
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
			if c.start != 0 {
				errshape.Require(t, err, fmt.Sprintf("%#x", c.start)) // one line, naming where
			}
		})
	}
	_, err := ParseBTF(good[:10], "short")
	assert.True(t, errors.Is(err, ErrCorrupt))
}

// BenchmarkBTFLayouts measures what modsyms pays on first use: read the
// vmlinux BTF out of (here, flat) memory ("read"), then parse it and
// resolve the structs modsyms needs ("layouts", the blob in memory).
func BenchmarkBTFLayouts(b *testing.B) {
	raw := hostBTF(b)
	const base = 0xffffffff82000000
	mem := flatMem{base, raw}
	resolve := func(b *testing.B, src *BTF) {
		for _, n := range []string{"module", "mod_kallsyms", "module_memory", "list_head"} {
			if _, err := src.Struct(n); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := src.Enum("mod_mem_type"); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := readBlob(mem, base, uint64(len(raw))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("layouts", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			src, err := ParseBTF(raw, "bench")
			if err != nil {
				b.Fatal(err)
			}
			resolve(b, src)
		}
	})
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			src, err := FromMemory(mem, base, base+uint64(len(raw)))
			if err != nil {
				b.Fatal(err)
			}
			resolve(b, src)
		}
	})
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

// smallBTF is a little-endian blob holding int, char[56], struct list_head
// {next, prev}, struct module {state, list, name} (with an anonymous union
// and a bitfield) and enum mod_mem_type: a seed reaching every decoding
// path of Struct and Enum.
func smallBTF() []byte {
	strs := "\x00int\x00char\x00list_head\x00next\x00prev\x00module\x00state\x00list\x00name\x00flag\x00mod_mem_type\x00MOD_TEXT\x00MOD_DATA\x00"
	off := func(s string) uint32 { return uint32(strings.Index(strs, "\x00"+s+"\x00") + 1) }
	var ty []byte
	u32 := func(v ...uint32) {
		for _, x := range v {
			ty = binary.LittleEndian.AppendUint32(ty, x)
		}
	}
	info := func(kind, vlen uint32, kflag bool) uint32 {
		v := kind<<24 | vlen
		if kflag {
			v |= 1 << 31
		}
		return v
	}
	u32(off("int"), info(1, 0, false), 4, 32)    // 1 int
	u32(off("char"), info(1, 0, false), 1, 8)    // 2 char
	u32(0, info(3, 0, false), 0, 2, 1, 56)       // 3 char[56]
	u32(off("list_head"), info(4, 2, false), 16) // 4 struct list_head
	u32(off("next"), 5, 0, off("prev"), 5, 64)   //
	u32(0, info(2, 0, false), 4)                 // 5 struct list_head *
	u32(0, info(5, 1, false), 4)                 // 6 anonymous union
	u32(off("state"), 1, 0)                      //
	u32(off("module"), info(4, 4, true), 96)     // 7 struct module
	u32(0, 6, 0, off("list"), 4, 64, off("name"), 3, 192, off("flag"), 1, 1<<24|640)
	u32(off("mod_mem_type"), info(6, 2, false), 4) // 8 enum
	u32(off("MOD_TEXT"), 0, off("MOD_DATA"), 1)
	h := make([]byte, 24)
	copy(h, []byte{0x9f, 0xeb, 1, 0, 24})
	binary.LittleEndian.PutUint32(h[12:], uint32(len(ty)))
	binary.LittleEndian.PutUint32(h[16:], uint32(len(ty)))
	binary.LittleEndian.PutUint32(h[20:], uint32(len(strs)))
	return append(append(h, ty...), strs...)
}

func TestSmallBTF(t *testing.T) {
	b, err := ParseBTF(smallBTF(), "small")
	require.NoError(t, err)
	m, err := b.Struct("module", "state", "list", "name", "flag")
	require.NoError(t, err)
	require.Equal(t, uint64(96), m.Size)
	f, _ := m.Field("list")
	require.Equal(t, uint64(8), f.Offset)
	require.Equal(t, KindStruct, f.Kind)
	f, _ = m.Field("name")
	require.Equal(t, Field{Name: "name", Offset: 24, Size: 56, Kind: KindArray, TypeName: "char", Count: 56, ElemSize: 1}, f)
	f, _ = m.Field("flag")
	require.Equal(t, Field{Name: "flag", Offset: 80, BitOffset: 640, BitSize: 1, Size: 4, Kind: KindInt}, f)
	lh, err := b.Struct("list_head", "next", "prev")
	require.NoError(t, err)
	f, _ = lh.Field("prev")
	require.Equal(t, Field{Name: "prev", Offset: 8, Size: 8, Kind: KindPointer, TypeName: "list_head"}, f)
	e, err := b.Enum("mod_mem_type")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"MOD_TEXT": 0, "MOD_DATA": 1}, e)
	_, err = b.Struct("nothing")
	require.Error(t, err)
}

func FuzzParseBTF(f *testing.F) {
	f.Add([]byte{0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Add(smallBTF())
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBTF(data, "fuzz")
		if err != nil {
			if b != nil {
				t.Fatal("error with a result")
			}
			return
		}
		_, _ = b.Struct("module", "list")
		_, _ = b.Struct("list_head")
		_, _ = b.Enum("mod_mem_type")
	})
}
