package symfinder

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func collect(f Finder, q Query) []Symbol {
	var out []Symbol
	_ = f.Find(q, func(s Symbol) bool { out = append(out, s); return true })
	return out
}

func names(ss []Symbol) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestIndexDerived(t *testing.T) {
	b := NewBuilder("kallsyms", "")
	b.AddString(0x1000, 'T', "_stext")
	b.AddString(0x1000, 'T', "startup")
	b.AddString(0x1010, 't', "foo")
	b.AddString(0x1040, 'T', "bar")
	b.AddString(0x1040, 'W', "bar_weak")
	b.AddString(0x1080, 't', "foo")
	b.SetDerivedEnd(0x1100)
	ix, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, 6, ix.Len())

	s, ok := ix.Lookup(0x1000)
	require.True(t, ok)
	assert.Equal(t, Symbol{Name: "_stext", Addr: 0x1000, Size: 0x10, SizeDerived: true, Kind: 'T'}, s)
	assert.Equal(t, []string{"_stext", "startup"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x100f})))
	assert.Equal(t, []string{"bar", "bar_weak"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x107f})))
	s, _ = ix.Lookup(0x10ff)
	assert.Equal(t, "foo", s.Name)
	assert.EqualValues(t, 0x80, s.Size)
	assert.Equal(t, "foo+0x7f/0x80", s.Format(0x10ff))
	_, ok = ix.Lookup(0x1100)
	assert.False(t, ok, "past the derived end")
	_, ok = ix.Lookup(0xfff)
	assert.False(t, ok)

	foo := collect(ix, Query{Kind: ByName, Name: "foo"})
	require.Len(t, foo, 2)
	assert.EqualValues(t, 0x1010, foo[0].Addr)
	assert.EqualValues(t, 0x1080, foo[1].Addr)
	assert.Empty(t, collect(ix, Query{Kind: ByName, Name: "fo"}))
	assert.Equal(t, []string{"_stext", "startup", "foo", "bar", "bar_weak", "foo"}, names(collect(ix, Query{Kind: All})))
}

func TestIndexNoEnd(t *testing.T) {
	b := NewBuilder("x", "")
	b.AddString(0x10, 'T', "a")
	b.AddString(0x20, 'T', "b")
	ix, err := b.Build()
	require.NoError(t, err)
	s, ok := ix.Lookup(0x20)
	require.True(t, ok)
	assert.EqualValues(t, 0, s.Size)
	_, ok = ix.Lookup(0x21)
	assert.False(t, ok)
}

func TestIndexSizedUnsorted(t *testing.T) {
	b := NewBuilder("module:xfs", "xfs")
	b.AddSized(0x3000, 0x100, 't', []byte("outer"))
	b.AddSized(0x1000, 0x20, 'T', []byte("first"))
	b.AddSized(0x3010, 0x10, 't', []byte("inner"))
	b.AddSized(0x2000, 0, 'd', []byte("zero"))
	b.AddSized(0x3010, 0x20, 't', []byte("inner2"))
	ix, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"inner", "inner2", "outer"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x3015})))
	assert.Equal(t, []string{"inner2", "outer"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x3025})))
	assert.Equal(t, []string{"outer"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x30ff})))
	assert.Empty(t, collect(ix, Query{Kind: ByAddr, Addr: 0x3100}))
	assert.Equal(t, []string{"zero"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x2000})))
	assert.Empty(t, collect(ix, Query{Kind: ByAddr, Addr: 0x2001}))
	s, _ := ix.Lookup(0x1004)
	assert.Equal(t, "first+0x4/0x20 [xfs]", s.Format(0x1004))
	assert.Equal(t, []string{"outer", "first", "inner", "zero", "inner2"}, names(collect(ix, Query{Kind: All})))
}

func TestIndexSizedWraps(t *testing.T) {
	b := NewBuilder("m", "m")
	b.AddSized(^uint64(0)-1, 16, 't', []byte("top"))
	ix, err := b.Build()
	require.NoError(t, err)
	s, ok := ix.Lookup(^uint64(0))
	require.True(t, ok)
	assert.Equal(t, "top", s.Name)
}

// TestIndexOverlapsShuffled checks address lookups against a brute-force
// answer for overlapping sized symbols in random order (after drgn's
// test_symbol.py).
func TestIndexOverlapsShuffled(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type sym struct{ addr, size uint64 }
	var syms []sym
	for i := 0; i < 300; i++ {
		syms = append(syms, sym{uint64(r.IntN(4000)), uint64(r.IntN(200))})
	}
	b := NewBuilder("m", "m")
	for i, s := range syms {
		b.AddSized(s.addr, s.size, 't', fmt.Appendf(nil, "s%d", i))
	}
	ix, err := b.Build()
	require.NoError(t, err)
	for a := uint64(0); a < 4300; a += 7 {
		var want []int
		for i, s := range syms {
			if a-s.addr < max(s.size, 1) {
				want = append(want, i)
			}
		}
		slices.SortStableFunc(want, func(x, y int) int {
			if syms[x].addr != syms[y].addr {
				if syms[x].addr > syms[y].addr {
					return -1
				}
				return 1
			}
			return 0
		})
		var wantNames []string
		for _, i := range want {
			wantNames = append(wantNames, fmt.Sprintf("s%d", i))
		}
		require.Equal(t, wantNames, names(collect(ix, Query{Kind: ByAddr, Addr: a})), "addr %d", a)
	}
}

func TestIndexNameDuplicates(t *testing.T) {
	b := NewBuilder("k", "")
	for i, n := range []string{"b", "a", "c", "a"} {
		b.AddString(uint64(i)*16, 'T', n)
	}
	ix, err := b.Build()
	require.NoError(t, err)
	got := collect(ix, Query{Kind: ByName, Name: "a"})
	require.Len(t, got, 2)
	assert.EqualValues(t, 16, got[0].Addr)
	assert.EqualValues(t, 48, got[1].Addr)
	assert.Len(t, collect(ix, Query{Kind: ByName, Name: "c"}), 1)
	assert.Empty(t, collect(ix, Query{Kind: ByName, Name: "d"}))
}

func TestChain(t *testing.T) {
	b1 := NewBuilder("vmlinux", "")
	b1.AddString(0x1000, 'T', "core_fn")
	b1.SetDerivedEnd(0x2000)
	vm, _ := b1.Build()
	b2 := NewBuilder("modules", "xfs")
	b2.AddSized(0x5000, 0x40, 't', []byte("xfs_fn"))
	b2.AddSized(0x6000, 0x40, 't', []byte("core_fn"))
	mod, _ := b2.Build()
	broken := FinderFunc{FinderName: "broken", Func: func(Query, func(Symbol) bool) error { return fmt.Errorf("tables unreadable") }}

	c, err := NewChain(vm, broken, mod)
	require.NoError(t, err)
	require.Error(t, c.Add(vm))

	s, err := c.Lookup(0x5010)
	require.NoError(t, err)
	assert.Equal(t, "xfs_fn+0x10/0x40 [xfs]", s.Format(0x5010))
	s, err = c.LookupName("core_fn")
	require.NoError(t, err)
	assert.Equal(t, "", s.Module)
	all, err := c.Find(Query{Kind: ByName, Name: "core_fn"})
	require.NoError(t, err)
	assert.Len(t, all, 2)

	// A miss names the finder that failed; its error is kept once, in
	// Failures, however many lookups it failed (issue 29.3: one library
	// Lookup miss was 1,473 bytes holding one root cause four times).
	for range 3 {
		_, err = c.Lookup(0x9000)
		assert.ErrorIs(t, err, ErrNotFound)
		var nf *NotFoundError
		require.ErrorAs(t, err, &nf)
		assert.Equal(t, []string{"broken"}, nf.Unconsulted)
		assert.LessOrEqual(t, len(err.Error()), 200, err.Error())
	}
	_, err = c.Find(Query{Kind: ByName, Name: "nope"})
	assert.ErrorIs(t, err, ErrNotFound)
	require.Len(t, c.Failures(), 1)
	assert.Equal(t, "broken", c.Failures()[0].Finder)
	assert.EqualError(t, c.Failures()[0], "symfinder: broken: tables unreadable")

	require.NoError(t, c.SetOrder("modules", "vmlinux"))
	s, _ = c.LookupName("core_fn")
	assert.Equal(t, "xfs", s.Module)
	assert.Equal(t, []FinderState{{"modules", true}, {"vmlinux", true}, {"broken", false}}, c.Finders())
	require.NoError(t, c.SetEnabled("modules", false))
	s, _ = c.LookupName("core_fn")
	assert.Equal(t, "", s.Module)
	assert.ErrorIs(t, c.SetOrder("nope"), ErrNotFound)
	assert.True(t, c.Remove("broken"))
	assert.False(t, c.Remove("broken"))

	var n int
	for s, err := range c.All() {
		require.NoError(t, err)
		assert.Equal(t, "core_fn", s.Name)
		n++
	}
	assert.Equal(t, 1, n)
}

func BenchmarkIndexLookup(b *testing.B) {
	const n = 200000
	bl := NewBuilder("k", "")
	for i := 0; i < n; i++ {
		bl.Add(0xffffffff81000000+uint64(i)*64, 'T', fmt.Appendf(nil, "function_name_%07d", i*7919%n))
	}
	bl.SetDerivedEnd(0xffffffff81000000 + n*64)
	ix, _ := bl.Build()
	b.Run("ByAddr", func(b *testing.B) {
		b.ReportAllocs()
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			ix.Lookup(0xffffffff81000000 + uint64(r.IntN(n*64)))
		}
	})
	b.Run("ByName", func(b *testing.B) {
		b.ReportAllocs()
		ix.nameIndex()
		r := rand.New(rand.NewPCG(1, 2))
		qs := make([]string, 1024)
		for i := range qs {
			qs[i] = fmt.Sprintf("function_name_%07d", r.IntN(n))
		}
		i := 0
		for b.Loop() {
			_ = ix.Find(Query{Kind: ByName, Name: qs[i%1024]}, func(Symbol) bool { return false })
			i++
		}
	})
	b.ReportMetric(float64(ix.MemoryBytes()-len(ix.names))/n, "index-bytes/sym")
}

// TestIndexLargeBruteForce checks an index big enough for its radix table
// and name buckets against brute-force answers: aliases, duplicate names,
// names sharing long prefixes, built with Add (expecting sorted addresses
// or not) and in bulk with NewSorted.
func TestIndexLargeBruteForce(t *testing.T) {
	type sym = largeSym
	r := rand.New(rand.NewPCG(3, 4))
	var syms []sym
	prefixes := []string{"__pfx_", "__pfx_x", "a", "trace_event_raw_", "z", ""}
	// Per-CPU offsets from 0, then the kernel image (a compact index of
	// two runs); then, for a non-compact one, symbols spread over many
	// 4 GiB ranges.
	var a uint64
	for i := 0; i < 7000; i++ {
		switch {
		case i == 300:
			a = 0xffffffff81000000 - 1<<36
		case i > 5000 && r.IntN(100) == 0:
			a += 1 << 31
		case r.IntN(5) != 0:
			a += uint64(1 + r.IntN(300))
		}
		name := fmt.Sprintf("%s%d", prefixes[r.IntN(len(prefixes))], r.IntN(3000))
		syms = append(syms, sym{a, "tTdD"[r.IntN(4)], name})
	}
	for _, n := range []int{5000, len(syms)} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { testIndexLarge(t, syms[:n], prefixes, r) })
	}
}

type largeSym struct {
	addr uint64
	kind byte
	name string
}

func testIndexLarge(t *testing.T, syms []largeSym, prefixes []string, r *rand.Rand) {
	a := syms[len(syms)-1].addr
	end := a + 0x40
	for _, tc := range []struct {
		name      string
		expect    bool
		newSorted bool
	}{{"add", false, false}, {"expect-sorted", true, false}, {"new-sorted", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.newSorted {
				var nb []byte
				off := []uint32{0}
				for _, s := range syms {
					nb = append(append(nb, s.kind), s.name...)
					off = append(off, uint32(len(nb)))
				}
				ix, err := NewSorted("k", "", nb, off, func(first int, out []uint64) error {
					for j := range out {
						out[j] = syms[first+j].addr
					}
					return nil
				}, end, nil)
				require.NoError(t, err)
				checkLarge(t, ix, syms, prefixes, r, end)
				return
			}
			b := NewBuilder("k", "")
			if tc.expect {
				b.ExpectSorted()
			}
			b.Grow(len(syms), 0)
			for _, s := range syms {
				b.AddString(s.addr, s.kind, s.name)
			}
			b.SetDerivedEnd(end)
			ix, err := b.Build()
			require.NoError(t, err)
			checkLarge(t, ix, syms, prefixes, r, end)
		})
	}
}

func checkLarge(t *testing.T, ix *Index, syms []largeSym, prefixes []string, r *rand.Rand, end uint64) {
	require.Equal(t, len(syms) == 5000, ix.addrs == nil, "compact")
	// The brute-force answers compare with plain == and call testify only
	// on a difference: thousands of testify calls per index spent most of
	// the test walking the stack for t.Helper.
	sizes := make([]uint64, len(syms)) // up to the next higher address, or end
	for i := len(syms) - 1; i >= 0; i-- {
		switch {
		case i+1 == len(syms):
			sizes[i] = end - syms[i].addr
		case syms[i+1].addr != syms[i].addr:
			sizes[i] = syms[i+1].addr - syms[i].addr
		default:
			sizes[i] = sizes[i+1] + syms[i+1].addr - syms[i].addr
		}
	}
	sizeOf := func(i int) uint64 { return sizes[i] }
	all := collect(ix, Query{Kind: All})
	require.Len(t, all, len(syms))
	for i, s := range syms {
		want := Symbol{Name: s.name, Addr: s.addr, Size: sizeOf(i), SizeDerived: true, Kind: Kind(s.kind)}
		if all[i] != want {
			require.Equal(t, want, all[i], "symbol %d", i)
		}
		if size, derived := ix.Size(i); !derived || size != want.Size {
			require.True(t, derived)
			require.Equal(t, want.Size, size)
		}
	}
	for q := 0; q < 3000; q++ {
		var addr uint64
		if q%2 == 0 {
			addr = syms[r.IntN(len(syms))].addr + uint64(r.IntN(3))
		} else {
			addr = syms[r.IntN(len(syms))].addr + uint64(r.IntN(600)) - 300
			if q%10 == 1 {
				addr = r.Uint64()
			}
		}
		var want []string
		for i := len(syms) - 1; i >= 0; i-- {
			if syms[i].addr <= addr {
				g := syms[i].addr
				if addr-g < sizeOf(i) {
					for i > 0 && syms[i-1].addr == g {
						i--
					}
					for ; i < len(syms) && syms[i].addr == g; i++ {
						want = append(want, syms[i].name)
					}
				}
				break
			}
		}
		if got := names(collect(ix, Query{Kind: ByAddr, Addr: addr})); !sameSlice(want, got) {
			require.Equal(t, want, got, "addr %#x", addr)
		}
	}
	queries := []string{"", "__pfx", "__pfx_", "zz", "a", "~"}
	for q := 0; q < 2000; q++ {
		queries = append(queries, fmt.Sprintf("%s%d", prefixes[r.IntN(len(prefixes))], r.IntN(3100)))
	}
	byName := map[string][]uint64{} // each name's addresses, in syms order
	for _, s := range syms {
		byName[s.name] = append(byName[s.name], s.addr)
	}
	for _, q := range queries {
		want := byName[q]
		var got []uint64
		for _, s := range collect(ix, Query{Kind: ByName, Name: q}) {
			got = append(got, s.Addr)
		}
		if !sameSlice(want, got) {
			require.Equal(t, want, got, "name %q", q)
		}
	}
}

// sameSlice is what require.Equal holds of two slices, without reflection:
// the same elements, and nil only as the other is.
func sameSlice[E comparable](a, b []E) bool {
	return slices.Equal(a, b) && (a == nil) == (b == nil)
}

// TestNewSortedErrors checks that NewSorted refuses what it cannot index.
func TestNewSortedErrors(t *testing.T) {
	addrs := func(v ...uint64) func(int, []uint64) error {
		return func(first int, out []uint64) error { copy(out, v[first:]); return nil }
	}
	// Each refusal is corruption, in one line naming the index and where.
	refused := func(err error, where ...string) {
		t.Helper()
		require.ErrorIs(t, err, ErrCorrupt)
		errshape.Require(t, err, where...)
	}
	_, err := NewSorted("k", "", []byte("Ta"), nil, addrs(), 0, nil)
	refused(err, "symfinder: k: ")
	_, err = NewSorted("k", "", []byte("TaTb"), []uint32{0, 2, 2}, addrs(1, 2), 0, nil)
	refused(err, "symfinder: k: ", "symbol 1 ")
	_, err = NewSorted("k", "", []byte("TaTb"), []uint32{0, 2, 5}, addrs(1, 2), 0, nil)
	refused(err, "symfinder: k: ", "5")
	_, err = NewSorted("k", "", []byte("TaTb"), []uint32{0, 2, 4}, addrs(2, 1), 0, nil)
	refused(err, "symbol 1 at 0x1 ")
	unreadable := errors.New("unreadable")
	_, err = NewSorted("k", "", []byte("TaTb"), []uint32{0, 2, 4}, func(int, []uint64) error { return unreadable }, 0, nil)
	require.ErrorIs(t, err, unreadable, "an error from addrs is returned as is")
	require.NotErrorIs(t, err, ErrCorrupt)
	ix, err := NewSorted("k", "", nil, []uint32{0}, addrs(), 0, nil)
	require.NoError(t, err)
	require.Zero(t, ix.Len())
	require.Empty(t, collect(ix, Query{Kind: ByName, Name: "a"}))
	require.Empty(t, collect(ix, Query{Kind: ByAddr, Addr: 1}))
}

// TestNameIndexSmall checks lookups by name on indexes of every small size,
// where the bucket count and tag width are at their edges.
func TestNameIndexSmall(t *testing.T) {
	for n := 0; n <= 70; n++ {
		b := NewBuilder("k", "")
		var want []string
		for i := range n {
			name := fmt.Sprintf("s%d", i%(n/3+1))
			want = append(want, name)
			b.AddString(uint64(i), 'T', name)
		}
		ix, err := b.Build()
		require.NoError(t, err)
		for q := range n/3 + 2 {
			name := fmt.Sprintf("s%d", q)
			var w []uint64
			for i, s := range want {
				if s == name {
					w = append(w, uint64(i))
				}
			}
			var got []uint64
			for _, s := range collect(ix, Query{Kind: ByName, Name: name}) {
				got = append(got, s.Addr)
			}
			require.Equal(t, w, got, "n=%d %s", n, name)
		}
	}
}

// TestBuilderExpectSortedWrong checks that a builder told to expect sorted
// addresses still builds a correct index when they are not, or are sized.
func TestBuilderExpectSortedWrong(t *testing.T) {
	b := NewBuilder("k", "")
	b.ExpectSorted()
	b.AddString(0x30, 'T', "c")
	b.AddString(0x10, 'T', "a")
	b.AddString(0x20, 'T', "b")
	b.SetDerivedEnd(0x40)
	ix, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x15})))
	assert.Equal(t, []string{"c", "a", "b"}, names(collect(ix, Query{Kind: All})))

	b = NewBuilder("m", "m")
	b.ExpectSorted()
	b.AddString(0x10, 'T', "a")
	b.AddSized(0x20, 8, 't', []byte("b"))
	ix, err = b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, names(collect(ix, Query{Kind: ByAddr, Addr: 0x27})))
	assert.Empty(t, collect(ix, Query{Kind: ByAddr, Addr: 0x28}))
	assert.Equal(t, 2, ix.Len())
}

// TestNewSortedWindows checks NewSorted across several address windows
// whose high halves change mid-window, compact and (with more runs than a
// compact index keeps) wide, against a Builder.
func TestNewSortedWindows(t *testing.T) {
	for _, jumps := range [][]int{{4100, 9000, 15000}, {100, 5000, 5001, 9000, 9100, 12000, 12001, 13000, 14000, 19999}} {
		const n = 20000
		addrs := make([]uint64, n)
		a := uint64(0xffffffff00000000) - 1<<40
		for i := range addrs {
			if slices.Contains(jumps, i) {
				a += 1 << 33
			}
			a += uint64(i % 3 * 16)
			addrs[i] = a
		}
		var nb []byte
		off := []uint32{0}
		b := NewBuilder("k", "")
		for i, a := range addrs {
			name := fmt.Sprintf("s%d", i)
			nb = append(append(nb, 'T'), name...)
			off = append(off, uint32(len(nb)))
			b.AddString(a, 'T', name)
		}
		want, err := b.Build()
		require.NoError(t, err)
		got, err := NewSorted("k", "", nb, off, func(first int, out []uint64) error {
			copy(out, addrs[first:])
			return nil
		}, 0, nil)
		require.NoError(t, err)
		require.Equal(t, n, got.Len())
		for i, a := range addrs {
			require.Equal(t, a, got.Addr(i), "symbol %d", i)
		}
		require.Equal(t, collect(want, Query{Kind: All}), collect(got, Query{Kind: All}))
		for i := 0; i < n; i += 97 {
			q := Query{Kind: ByAddr, Addr: addrs[i] + 1}
			require.Equal(t, collect(want, q), collect(got, q))
		}
	}
}

// TestSortByAddr checks the radix sort against a stable comparison sort,
// for narrow and wide spans with many equal addresses.
func TestSortByAddr(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, spread := range []uint64{1, 300, 1 << 20, 1 << 40, 1<<64 - 1} {
		for _, n := range []int{0, 1, 2, 3, 100, 5000} {
			addrs := make([]uint64, n)
			for i := range addrs {
				addrs[i] = 0xffffffffc0000000 + r.Uint64N(spread)
				if i%50 == 7 {
					addrs[i] = 0x39000 // an absolute per-CPU symbol
				}
			}
			want := make([]uint32, n)
			for i := range want {
				want[i] = uint32(i)
			}
			slices.SortStableFunc(want, func(x, y uint32) int { return cmp.Compare(addrs[x], addrs[y]) })
			require.Equal(t, want, sortByAddr(addrs), "spread %#x n %d", spread, n)
		}
	}
}

// TestExtentsErrors: ranges that overlap or run backwards make Build fail
// with no index.
func TestExtentsErrors(t *testing.T) {
	for _, rs := range [][]Range{
		{{Start: 0x2000, End: 0x1000}},
		{{Start: 0x1000, End: 0x1000}},
		{{Start: 0x1000, End: 0x3000}, {Start: 0x2000, End: 0x4000}},
		{{Start: 0x1000, End: 0x2000, EndIncluded: true}, {Start: 0x2000, End: 0x4000}},
	} {
		b := NewBuilder("k", "")
		b.AddString(0x1000, 'T', "a")
		b.SetExtents(rs, nil)
		ix, err := b.Build()
		assert.Error(t, err, "%v", rs)
		assert.Nil(t, ix)
	}
	// Touching ranges are fine, and each bounds its own symbols.
	b := NewBuilder("k", "")
	b.AddString(0x1000, 'T', "a")
	b.AddString(0x2000, 'T', "b")
	b.SetExtents([]Range{{Start: 0x1000, End: 0x1800}, {Start: 0x1800, End: 0x3000}}, nil)
	ix, err := b.Build()
	require.NoError(t, err)
	s, ok := ix.Lookup(0x17ff)
	require.True(t, ok)
	assert.Equal(t, "a+0x7ff/0x800", s.Format(0x17ff))
	_, ok = ix.Lookup(0x1800)
	assert.False(t, ok, "a lies in the range before")
	s, ok = ix.Lookup(0x2fff)
	require.True(t, ok)
	assert.Equal(t, "b+0xfff/0x1000", s.Format(0x2fff))
	size, derived := ix.Size(0)
	assert.EqualValues(t, 0x800, size)
	assert.True(t, derived)
}
