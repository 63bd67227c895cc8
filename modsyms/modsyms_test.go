package modsyms

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"encoding/binary"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// le64 is the target of the synthetic kernels.
var le64 = memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}

func tableOpt(t testing.TB, b *kbuilder) Options {
	return Options{Target: le64, Layout: b.lay}
}

func TestMemLayoutTypetab(t *testing.T) {
	b := newKBuilder(t, layout64)
	b.add(kmod{name: "xfs", refcnt: 3, textSize: 0x2000, textBase: 0xffffffffc1000000, syms: []ksym{
		{name: "xfs_init", value: 0xffffffffc1000000, size: 0x40, typ: 't'},
		{name: "", value: 0xffffffffc1000010, typ: 't'}, // skipped
		{name: "xfs_export", value: 0xffffffffc1000100, size: 0x20, typ: 't', export: true},
		{name: "xfs_data", value: 0xffffffffc1100000, size: 8, typ: 'd'},
		{name: "xfs_shadow", value: 0xffffffffc1000200, size: 8, typ: 'T'}, // not exported: lowered
	}})
	b.add(kmod{name: "gone", state: uint32(StateUnformed), syms: []ksym{{name: "hidden", value: 1, typ: 't'}}})
	b.add(kmod{name: "ext4", state: uint32(StateComing), refcnt: 1, textSize: 0x1000, syms: []ksym{
		{name: "ext4_a", value: 0xffffffffc2000000, size: 0x10, typ: 't', export: true},
		{name: "ext4_b", value: 0xffffffffc2000010, size: 0x10, typ: 'r'},
	}})
	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.NoError(t, err)
	lines, err := kallsymsLines(t, set)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ffffffffc1000000 t xfs_init\t[xfs]",
		"ffffffffc1000100 T xfs_export\t[xfs]",
		"ffffffffc1100000 d xfs_data\t[xfs]",
		"ffffffffc1000200 t xfs_shadow\t[xfs]",
		"ffffffffc2000000 T ext4_a\t[ext4]",
		"ffffffffc2000010 r ext4_b\t[ext4]",
	}, lines)

	mods := set.Modules()
	require.Len(t, mods, 2)
	x := mods[0]
	assert.Equal(t, "xfs", x.Name)
	assert.Equal(t, StateLive, x.State)
	assert.Equal(t, int64(2), x.RefCount)
	assert.True(t, x.HasRefCount)
	assert.Equal(t, uint64(6), x.NumSymtab)
	require.Len(t, x.Regions, 7)
	assert.Equal(t, "MOD_TEXT", x.Regions[0].Name)
	assert.Equal(t, x.TextBase, x.Regions[0].Base)
	assert.Equal(t, uint64(0x2000), x.Regions[0].TextSize)
	assert.Equal(t, x.Regions[0].Size+x.Regions[1].Size, x.Size)
	assert.Equal(t, x.Size, x.CoreSize)
	assert.Equal(t, StateComing, mods[1].State)
	assert.Equal(t, "module:xfs", x.Symbols.Name())

	// Lookups through the combined finder, with the kernel's extents (up
	// to the next symbol, within the region) and the ELF sizes.
	s, ok := first(set, symfinder.Query{Kind: symfinder.ByAddr, Addr: 0xffffffffc1000104})
	require.True(t, ok)
	assert.Equal(t, "xfs_export", s.Name)
	assert.Equal(t, uint64(0x100), s.Size)
	assert.Equal(t, uint64(0x20), s.ELFSize)
	assert.Equal(t, "xfs", s.Module)
	s, ok = first(set, symfinder.Query{Kind: symfinder.ByAddr, Addr: 0xffffffffc1000120})
	assert.True(t, ok, "the padding after xfs_export is its own, as the kernel prints it")
	assert.Equal(t, "xfs_export", s.Name)
	s, ok = first(set, symfinder.Query{Kind: symfinder.ByAddr, Addr: 0xffffffffc1001ff0})
	require.True(t, ok)
	assert.Equal(t, "xfs_shadow", s.Name)
	assert.Equal(t, uint64(0x1e00), s.Size, "the last text symbol ends with the text region")
	_, ok = first(set, symfinder.Query{Kind: symfinder.ByAddr, Addr: 0xffffffffc1002000})
	assert.False(t, ok, "past the text region")
	_, ok = first(set, symfinder.Query{Kind: symfinder.ByAddr, Addr: 0xffffffffc1100000})
	assert.False(t, ok, "xfs_data lies in no region of xfs")
	s, ok = first(set, symfinder.Query{Kind: symfinder.ByName, Name: "ext4_b"})
	require.True(t, ok)
	assert.Equal(t, "ext4", s.Module)
	_, ok = first(set, symfinder.Query{Kind: symfinder.ByName, Name: "hidden"})
	assert.False(t, ok, "unformed modules are skipped")
}

func first(f symfinder.Finder, q symfinder.Query) (symfinder.Symbol, bool) {
	var s symfinder.Symbol
	var ok bool
	_ = f.Find(q, func(sym symfinder.Symbol) bool { s, ok = sym, true; return false })
	return s, ok
}

func TestCoreLayoutNoTypetab(t *testing.T) {
	b := newKBuilder(t, layoutCore)
	b.add(kmod{name: "old", textSize: 0x800, syms: []ksym{
		{name: "old_fn", value: 0xffffffffa0000000, size: 0x30, typ: 't'},
		{name: "old_exp", value: 0xffffffffa0000040, size: 0x30, typ: 't', export: true},
		{name: "old_bss", value: 0xffffffffa0010000, size: 4, typ: 'b'},
	}})
	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.NoError(t, err)
	lines, err := kallsymsLines(t, set)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ffffffffa0000000 t old_fn\t[old]",
		"ffffffffa0000040 T old_exp\t[old]",
		"ffffffffa0010000 b old_bss\t[old]",
	}, lines)
	m := set.Modules()[0]
	require.Len(t, m.Regions, 2)
	assert.Equal(t, "core", m.Regions[0].Name)
	assert.Equal(t, uint64(0x800), m.Regions[0].TextSize)
	assert.Equal(t, m.Regions[0].Base, m.TextBase)
	assert.True(t, m.Regions[1].Init)
	assert.Equal(t, m.Regions[0].Size, m.Size)
	assert.False(t, m.HasRefCount)
}

func TestCycle(t *testing.T) {
	b := newKBuilder(t, layout64)
	a := b.add(kmod{name: "a", syms: []ksym{{name: "a1", value: 0x1000, typ: 't'}}})
	c := b.add(kmod{name: "c", syms: []ksym{{name: "c1", value: 0x2000, typ: 't'}}})
	// c.next → a instead of the head.
	b.mem.Write(c+8, u64s(a+8))
	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.Error(t, err)
	var we *WalkError
	require.ErrorAs(t, err, &we)
	assert.ErrorIs(t, err, ErrCorrupt)
	require.NotNil(t, set)
	assert.Len(t, set.Modules(), 2)
}

func TestWildPointerRecoversBackwards(t *testing.T) {
	b := newKBuilder(t, layout64)
	b.add(kmod{name: "a", syms: []ksym{{name: "a1", value: 0x1000, typ: 't'}}})
	m2 := b.add(kmod{name: "b", syms: []ksym{{name: "b1", value: 0x2000, typ: 't'}}})
	b.add(kmod{name: "c", syms: []ksym{{name: "c1", value: 0x3000, typ: 't'}}})
	b.mem.Drop(m2, 512) // struct module of b lost
	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.Error(t, err)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	require.NotNil(t, set)
	var names []string
	for _, m := range set.Modules() {
		names = append(names, m.Name)
	}
	assert.Equal(t, []string{"a", "c"}, names)
}

// TestTwoBreaks: with two struct modules lost, the walk from either end
// keeps the modules outside them, and each break is reported once.
func TestTwoBreaks(t *testing.T) {
	b := newKBuilder(t, layout64)
	var ms []uint64
	for i, n := range []string{"a", "b", "c", "d"} {
		ms = append(ms, b.add(kmod{name: n, syms: []ksym{{name: n + "1", value: 0x1000 * uint64(i+1), typ: 't'}}}))
	}
	b.mem.Drop(ms[1], 512)
	b.mem.Drop(ms[2], 512)
	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.NotNil(t, set)
	var names []string
	for _, m := range set.Modules() {
		names = append(names, m.Name)
	}
	assert.Equal(t, []string{"a", "d"}, names)
	n := 0
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *WalkError
		if errors.As(e, &we) {
			n++
		}
	}
	assert.Equal(t, 2, n, "each break once")
}

func TestFilteredModule(t *testing.T) {
	b := newKBuilder(t, layout64)
	b.add(kmod{name: "a", textBase: 0x1000, textSize: 0x100, syms: []ksym{{name: "a1", value: 0x1000, size: 1, typ: 't'}}})
	m2 := b.add(kmod{name: "big", textBase: 0x2000, textSize: 0x100, syms: []ksym{{name: "b1", value: 0x2000, typ: 't'}}})
	b.add(kmod{name: "c", textBase: 0x3000, textSize: 0x100, syms: []ksym{{name: "c1", value: 0x3000, size: 1, typ: 't'}}})
	// Drop big's symtab (it lies in its data region).
	mem, _ := b.lay.Struct("module")
	f, _ := mem.Field("mem")
	base, err := memory.Uint64(b.mem, le, m2+f.Offset+16)
	require.NoError(t, err)
	b.mem.Drop(base, 1)

	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.Error(t, err)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	var me *ModuleError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "big", me.Name)
	errshape.Require(t, me)
	require.Len(t, set.Modules(), 3)
	assert.Nil(t, set.Modules()[1].Symbols)
	lines, ferr := kallsymsLines(t, set)
	assert.ErrorIs(t, ferr, memory.ErrNotSaved, "Find reports the failed module after yielding the rest")
	assert.Equal(t, []string{"0000000000001000 t a1\t[a]", "0000000000003000 t c1\t[c]"}, lines)

	// Through a chain, a hit hides the error; a miss names the finder, and
	// the chain keeps its error once.
	ch, err := symfinder.NewChain(set)
	require.NoError(t, err)
	s, err := ch.Lookup(0x3000)
	require.NoError(t, err)
	assert.Equal(t, "c1", s.Name)
	_, err = ch.Lookup(0x2000)
	assert.ErrorIs(t, err, symfinder.ErrNotFound)
	var nf *symfinder.NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, []string{FinderName}, nf.Unconsulted)
	require.Len(t, ch.Failures(), 1)
	assert.ErrorIs(t, ch.Failures()[0], memory.ErrNotSaved)
}

func TestHostile(t *testing.T) {
	setup := func() (*kbuilder, uint64) {
		b := newKBuilder(t, layout64)
		m := b.add(kmod{name: "evil", syms: []ksym{{name: "x", value: 0x1000, typ: 't'}}})
		b.add(kmod{name: "good", syms: []ksym{{name: "g", value: 0x2000, typ: 't'}}})
		return b, m
	}
	kallsymsPtr := func(b *kbuilder, m uint64) uint64 {
		p, err := memory.Uint64(b.mem, le, m+256)
		require.NoError(t, err)
		return p
	}
	cases := []struct {
		name  string
		patch func(b *kbuilder, m uint64)
		class error // memory.ErrCorrupt or memory.ErrNotSaved
	}{
		{"num_symtab 2^31", func(b *kbuilder, m uint64) {
			b.mem.Write(kallsymsPtr(b, m)+8, []byte{0, 0, 0, 0x80})
		}, memory.ErrCorrupt},
		{"num_symtab readable only in part", func(b *kbuilder, m uint64) {
			b.mem.Write(kallsymsPtr(b, m)+8, []byte{0, 0, 1, 0})
		}, memory.ErrNotSaved},
		{"name without NUL", func(b *kbuilder, m uint64) {
			b.mem.Write(m+24, []byte(strings.Repeat("A", 56)))
		}, memory.ErrCorrupt},
		{"st_name beyond strtab", func(b *kbuilder, m uint64) {
			symtab, _ := memory.Uint64(b.mem, le, kallsymsPtr(b, m))
			b.mem.Write(symtab+24, []byte{0xff, 0xff, 0xff, 0x7f})
		}, memory.ErrCorrupt},
		{"st_name into unreadable memory", func(b *kbuilder, m uint64) {
			symtab, _ := memory.Uint64(b.mem, le, kallsymsPtr(b, m))
			b.mem.Write(symtab+24, []byte{0, 0, 0x10, 0})
		}, memory.ErrNotSaved},
		{"kallsyms NULL", func(b *kbuilder, m uint64) {
			b.mem.Write(m+256, make([]byte, 8))
		}, memory.ErrCorrupt},
		{"num_syms huge", func(b *kbuilder, m uint64) {
			b.mem.Write(m+96, u64s(0xffffffffc0000000))
			b.mem.Write(m+104, []byte{0xff, 0xff, 0xff, 0xff})
		}, memory.ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, m := setup()
			c.patch(b, m)
			set, err := Load(b.mem, b.syms(), tableOpt(t, b))
			require.Error(t, err)
			assert.ErrorIs(t, err, c.class)
			// The bad module is named by its struct module, in one line.
			var me *ModuleError
			require.ErrorAs(t, err, &me)
			assert.Equal(t, m, me.Addr)
			errshape.Require(t, me)
			require.NotNil(t, set)
			good, ok := set.Module("good")
			require.True(t, ok)
			assert.NoError(t, good.Err, "the other module still loads")
			assert.NotNil(t, good.Symbols)
		})
	}
}

func TestLazy(t *testing.T) {
	b := newKBuilder(t, layout64)
	b.add(kmod{name: "a", syms: []ksym{{name: "a1", value: 0x1000, size: 4, typ: 't'}}})
	calls := 0
	syms := func(name string) (uint64, bool) { calls++; return b.syms()(name) }
	z := NewLazy(b.mem, syms, tableOpt(t, b))
	assert.Equal(t, "modules", z.Name())
	assert.Zero(t, calls, "nothing read before the first Find")
	s, ok := first(z, symfinder.Query{Kind: symfinder.ByName, Name: "a1"})
	require.True(t, ok)
	assert.Equal(t, "a", s.Module)
	n := calls
	_, _ = first(z, symfinder.Query{Kind: symfinder.ByAddr, Addr: 0x1000})
	assert.Equal(t, n, calls, "loaded once")

	// Without any layout source the load error comes back from Find.
	z = NewLazy(b.mem, b.syms(), Options{Target: le64})
	err := z.Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { return true })
	assert.ErrorIs(t, err, btflayout.ErrNoBTF)
}

func TestMissingModulesSymbol(t *testing.T) {
	b := newKBuilder(t, layout64)
	_, err := Load(b.mem, func(string) (uint64, bool) { return 0, false }, tableOpt(t, b))
	assert.ErrorIs(t, err, ErrMissingInfo)
}

func TestEmptyList(t *testing.T) {
	b := newKBuilder(t, layout64)
	set, err := Load(b.mem, b.syms(), tableOpt(t, b))
	require.NoError(t, err)
	assert.Empty(t, set.Modules())
}

func TestLayoutErrors(t *testing.T) {
	lay, err := btflayout.ParseTable(strings.NewReader("module.list = 0\nmodule.name = 16:56\n"), "t")
	require.NoError(t, err)
	_, err = Load(newFakeMem(), func(string) (uint64, bool) { return 0x1000, true }, Options{Target: le64, Layout: lay})
	assert.ErrorIs(t, err, ErrMissingInfo)
	assert.True(t, errors.Is(err, btflayout.ErrNotFound))
	// No target: an error, not a little-endian 64-bit guess.
	_, err = Load(newFakeMem(), func(string) (uint64, bool) { return 0x1000, true }, Options{Layout: lay})
	assert.ErrorIs(t, err, memory.ErrUnknownTarget)
}

func TestModuleFlags(t *testing.T) {
	for _, tc := range []struct {
		taints uint64
		state  State
		want   string
	}{
		{0, StateLive, ""},
		{1 << 13, StateLive, "(E)"},
		{1<<12 | 1<<13 | 1, StateLive, "(POE)"},
		{0, StateComing, "(+)"},
		{1 << 12, StateGoing, "(O-)"},
	} {
		m := &Module{Taints: tc.taints, State: tc.state}
		if got := m.Flags(); got != tc.want {
			t.Errorf("taints %#x state %v: got %q, want %q", tc.taints, tc.state, got, tc.want)
		}
	}
}
