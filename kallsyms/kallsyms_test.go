package kallsyms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// dumpAll formats a finder's symbols as /proc/kallsyms lines.
func dumpAll(t testing.TB, f symfinder.Finder, ptr int) string {
	var b []byte
	err := f.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		b = appendLine(b, s.Addr, byte(s.Kind), s.Name, 2*ptr)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// appendLine appends a /proc/kallsyms line, its address zero-padded to
// digits: what fmt's "%0*x %c %s\n" prints, without fmt's cost on the
// hundreds of thousands of lines a corpus kernel has.
func appendLine(b []byte, addr uint64, kind byte, name string, digits int) []byte {
	var hex [16]byte
	h := strconv.AppendUint(hex[:0], addr, 16)
	for range digits - len(h) {
		b = append(b, '0')
	}
	b = append(append(b, h...), ' ', kind, ' ')
	return append(append(b, name...), '\n')
}

// collect returns what a query finds. (Plain checks, not testify's: it
// runs for thousands of queries, and every require call walks the stack.)
func collect(t testing.TB, f symfinder.Finder, q symfinder.Query) []symfinder.Symbol {
	var out []symfinder.Symbol
	if err := f.Find(q, func(s symfinder.Symbol) bool { out = append(out, s); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireSameSyms fails the test, showing the difference, unless a and b
// are equal.
func requireSameSyms(t testing.TB, a, b []symfinder.Symbol, msgAndArgs ...any) {
	if !slices.Equal(a, b) {
		require.Equal(t, a, b, msgAndArgs...)
	}
}

func optsFor(g gen) Options { return Options{Target: memory.Target{ByteOrder: g.bo, PtrSize: g.ptr}} }

func TestLoadGenerations(t *testing.T) {
	// 3000 symbols: 12 markers, names tokenized from a varied vocabulary.
	// -short builds each generation's tables of 1000, still four markers
	// and every kind of entry makeSyms writes.
	n := 3000
	if testing.Short() {
		n = 1000
	}
	for _, g := range gens {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			s := build(g, makeSyms(g, n))
			want := procKallsyms(s.syms, g.ptr)
			for _, mode := range []struct {
				name string
				info *vmcoreinfo.Info
				opt  Options
				src  string
			}{
				{"vmcoreinfo", s.info, optsFor(g), "vmcoreinfo"},
				{"vmcoreinfo-autodetect", s.info, Options{}, "vmcoreinfo"},
				{"scan", s.infoBare, optsFor(g), "scan"},
				{"scan-autodetect", s.infoBare, Options{Target: memory.Target{PtrSize: g.ptr}}, "scan"},
			} {
				t.Run(mode.name, func(t *testing.T) {
					if mode.name == "vmcoreinfo-autodetect" && g.ptr == 4 {
						mode.opt.Target.PtrSize = 4 // VMCOREINFO of i386 names no architecture; _stext decides
					}
					res, err := Load(s.mem, mode.info, mode.opt)
					require.NoError(t, err)
					assert.Equal(t, Source(mode.src), res.Layout.Source)
					assert.Equal(t, g.enc, res.Layout.Encoding, res.Describe())
					assert.Equal(t, len(s.syms), res.Layout.NumSyms)
					assert.Equal(t, s.labels["kallsyms_markers"], res.Layout.Markers.Addr)
					assert.Equal(t, s.labels["kallsyms_seqs_of_names"], res.Layout.SeqsOfNames.Addr)
					assert.Equal(t, s.labels["kallsyms_names"], res.Layout.Names.Addr)
					got := dumpAll(t, res.Index, g.ptr)
					require.Equal(t, want, got)

					// The lazy finder reads the tables the same however
					// they were found: -short compares it with the index
					// once per generation, in the first mode.
					if testing.Short() && mode.name != "vmcoreinfo" {
						return
					}
					lz := mode.opt
					lz.Lazy = true
					lres, err := Load(s.mem, mode.info, lz)
					require.NoError(t, err)
					require.NotNil(t, lres.Lazy)
					compareFinders(t, res.Index, lres.Lazy, s.syms)
				})
			}
		})
	}
}

// compareFinders checks that two finders answer every query alike.
func compareFinders(t *testing.T, a, b symfinder.Finder, syms []sym) {
	t.Helper()
	all := symfinder.Query{Kind: symfinder.All}
	requireSameSyms(t, collect(t, a, all), collect(t, b, all))
	for i, y := range syms {
		if i%7 != 0 && y.name != "_end" && y.name != "_stext" && i != len(syms)-2 {
			continue
		}
		for _, addr := range []uint64{y.addr, y.addr + 1, y.addr - 1} {
			q := symfinder.Query{Kind: symfinder.ByAddr, Addr: addr}
			requireSameSyms(t, collect(t, a, q), collect(t, b, q), "addr %#x", addr)
		}
		q := symfinder.Query{Kind: symfinder.ByName, Name: y.name}
		ga := collect(t, a, q)
		if len(ga) == 0 {
			t.Fatalf("%s: not found", y.name)
		}
		requireSameSyms(t, ga, collect(t, b, q), y.name)
	}
	for _, n := range []string{"", "no_such_symbol", "zzzz", "_", "dup_static_fn"} {
		q := symfinder.Query{Kind: symfinder.ByName, Name: n}
		requireSameSyms(t, collect(t, a, q), collect(t, b, q), n)
	}
}

func TestSizesAndTypes(t *testing.T) {
	g := gens[5] // 6.12-style
	s := build(g, makeSyms(g, 1000))
	res, err := Load(s.mem, s.info, Options{})
	require.NoError(t, err)
	ix := res.Index
	for i := 0; i+1 < len(s.syms); i++ {
		size, derived := ix.Size(i)
		require.True(t, derived)
		next := s.syms[i+1].addr
		for j := i + 1; j < len(s.syms) && next == s.syms[i].addr; j++ {
			next = s.syms[j].addr
		}
		if next > s.syms[i].addr {
			require.Equal(t, next-s.syms[i].addr, size, s.syms[i].name)
		}
	}
	// _end is the last symbol and ends the derived range (KALLSYMS_ALL).
	last := ix.Len() - 1
	assert.Equal(t, "_end", string(ix.NameBytes(last)))
	size, _ := ix.Size(last)
	assert.Zero(t, size)
	sym, ok := ix.Lookup(s.stext + 3)
	require.True(t, ok)
	assert.Equal(t, "_text", sym.Name) // the first of the alias group, as the kernel reports
}

// TestBigSymbolType states where the live kernel printed a wrong type letter:
// before "kallsyms: Fix wrong "big" kernel symbol type read from procfs"
// (v6.18, stable backports) /proc/kallsyms took the type from the token of
// the second prefix byte. We print the letter the kernel meant.
func TestBigSymbolType(t *testing.T) {
	g := gens[7]
	s := build(g, makeSyms(g, 1000))
	res, err := Load(s.mem, s.info, Options{})
	require.NoError(t, err)
	assert.True(t, res.Layout.BigNames)
	found := false
	for i, y := range s.syms {
		off := s.namesOff[i]
		if s.names[off]&0x80 == 0 {
			continue
		}
		found = true
		buggy := s.tokTab[s.tokIdx[s.names[off+1]]]
		got := res.Index.Symbol(i)
		assert.Equal(t, y.name, got.Name)
		assert.Equal(t, symfinder.Kind('t'), got.Kind)
		assert.NotEqual(t, buggy, got.Kind, "pre-6.18 kernels printed %q for %s", buggy, y.name)
	}
	assert.True(t, found)
}

func TestDescribe(t *testing.T) {
	g := gens[0]
	s := build(g, makeSyms(g, 600))
	res, err := Load(s.mem, s.info, Options{})
	require.NoError(t, err)
	d := res.Describe()
	assert.Contains(t, d, "vmcoreinfo")
	assert.Contains(t, d, "absolute per-CPU")
	assert.Contains(t, d, "markers")
	regs := res.Layout.Regions()
	require.NotEmpty(t, regs)
	for i := 1; i < len(regs); i++ {
		assert.LessOrEqual(t, regs[i-1].Addr+regs[i-1].Size, regs[i].Addr)
	}
}

func TestErrors(t *testing.T) {
	g := gens[5]
	s := build(g, makeSyms(g, 1000))

	t.Run("no info, no scan", func(t *testing.T) {
		_, err := Load(s.mem, s.infoBare, Options{NoScan: true})
		require.ErrorIs(t, err, ErrMissingInfo)
		require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	})
	t.Run("target no kernel has", func(t *testing.T) {
		for _, tgt := range []memory.Target{{PtrSize: 2}, {PageSize: 3000}} {
			_, err := Load(s.mem, s.info, Options{Target: tgt})
			require.ErrorIs(t, err, errors.ErrUnsupported)
		}
	})
	t.Run("huge num_syms", func(t *testing.T) {
		m := &memMap{base: s.mem.base, data: append([]byte(nil), s.mem.data...)}
		na := s.labels["kallsyms_num_syms"]
		g.bo.PutUint32(m.data[na-m.base:], 1_000_000_000)
		_, err := Load(m, s.info, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorIs(t, err, memory.ErrCorrupt)
		var fe *FormatError
		require.True(t, errors.As(err, &fe))
		assert.Equal(t, na, fe.Addr)
	})
	t.Run("bad marker", func(t *testing.T) {
		m := &memMap{base: s.mem.base, data: append([]byte(nil), s.mem.data...)}
		ma := s.labels["kallsyms_markers"]
		g.bo.PutUint32(m.data[ma+4-m.base:], 0x1234)
		_, err := Load(m, s.info, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
		var fe *FormatError
		require.ErrorAs(t, err, &fe)
		// The names block that no longer ends at its marker is named.
		assert.GreaterOrEqual(t, fe.Addr, s.labels["kallsyms_names"])
		assert.Less(t, fe.Addr, ma)
	})
	t.Run("wrong _stext", func(t *testing.T) {
		info, err := vmcoreinfo.Parse([]byte(strings.Replace(string(s.info.Raw()), fmt.Sprintf("SYMBOL(_stext)=%x", s.stext), "SYMBOL(_stext)=ffffffff81000040", 1)))
		require.NoError(t, err)
		_, err = Load(s.mem, info, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
		var fe *FormatError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, uint64(0xffffffff81000040), fe.Val, "the _stext VMCOREINFO gives")
	})
	t.Run("unsaved address table", func(t *testing.T) {
		// 10000 entries span three chunks of the lazily read table.
		s := build(g, makeSyms(g, 10000))
		at := s.labels["kallsyms_offsets"]
		for _, cut := range []uint64{100, 20000, 39990} {
			m := &memMap{base: s.mem.base, data: s.mem.data[:at+cut-s.mem.base]}
			for _, lazy := range []bool{false, true} {
				res, err := Load(m, s.info, Options{Lazy: lazy})
				if err == nil {
					// A lazy finder may open on what it read; lookups
					// that need the rest fail.
					require.True(t, lazy)
					err = res.Lazy.Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { return true })
				}
				require.ErrorIs(t, err, memory.ErrNotSaved, "cut %d lazy %v", cut, lazy)
			}
		}
	})
	t.Run("base-relative offset wraps", func(t *testing.T) {
		// A damaged first offset whose sum with relative_base wraps past
		// the top decodes below every other address and so still sorts
		// (riscv64's base is 2 GiB below the top): refused, not taken.
		var br gen
		for _, x := range gens {
			if x.enc == BaseRelative && x.ptr == 8 && x.bo == binary.ByteOrder(binary.LittleEndian) {
				br = x
				break
			}
		}
		require.Equal(t, BaseRelative, br.enc)
		s := build(br, makeSyms(br, 1000))
		m := &memMap{base: s.mem.base, data: append([]byte(nil), s.mem.data...)}
		at := s.labels["kallsyms_offsets"]
		br.bo.PutUint32(m.data[at-m.base:], 0xffffffff)
		_, err := Load(m, s.info, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
		// The nearest miss is the first offset, with the address it
		// decodes to: relative_base + 0xffffffff, wrapped.
		var fe *FormatError
		require.ErrorAs(t, err, &fe)
		base := br.bo.Uint64(m.data[s.labels["kallsyms_relative_base"]-m.base:])
		assert.Equal(t, at, fe.Addr)
		assert.Equal(t, base+0xffffffff, fe.Val)
		errshape.Require(t, err, fmt.Sprintf("relative_base %#x", base))
	})
	t.Run("unsaved names", func(t *testing.T) {
		m := &memMap{base: s.mem.base, data: s.mem.data[:s.labels["kallsyms_names"]+100-s.mem.base]}
		_, err := Load(m, s.info, Options{})
		require.ErrorIs(t, err, memory.ErrNotSaved)
	})
}

// A scan of a small image allocates for the image, not a full 4 MiB read
// chunk: fuzzing and callers with a narrow ImageStart/ImageEnd scan many
// small windows.
func TestScanSmallWindowAllocs(t *testing.T) {
	g := gens[5]
	s := buildGap(g, makeSyms(g, 300), 0x2000)
	opt := optsFor(g)
	opt.ImageEnd = s.mem.base + uint64(len(s.mem.data))
	opt.Lazy = true
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := Load(s.mem, s.infoBare, opt)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, SourceScan, res.Layout.Source)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by a scan of a %d-byte image", len(s.mem.data))
}

// countingMem counts the bytes read through it.
type countingMem struct {
	memory.Reader
	n uint64
}

func (m *countingMem) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := m.Reader.ReadAt(p, addr)
	m.n += uint64(n)
	return n, err
}

// An image full of decoys makes a scan give up, not read for hours: every
// digit run costs a 12 KiB read and every token table that validates a
// read back of up to 13 MiB per layout, so 1 MiB of repeated token tables
// read over a GiB and 64 MiB of them petabytes; the candidate errors alone
// ran to tens of MiB.
func TestScanGivesUpOnDecoys(t *testing.T) {
	g := gens[5]
	s := buildGap(g, makeSyms(g, 300), 0x2000)
	tt := s.labels["kallsyms_token_table"] - s.mem.base
	ti := s.labels["kallsyms_token_index"] - s.mem.base
	tables := append([]byte(nil), s.mem.data[tt:ti+tokenIndexSize]...)
	for len(tables)%8 != 0 {
		tables = append(tables, 0)
	}
	for _, c := range []struct {
		name  string
		block []byte
		size  int
	}{
		{"digit runs", append([]byte("ab\x00"), digitRun...), 4 << 20},
		{"token tables", tables, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &countingMem{Reader: &memMap{base: s.mem.base, data: bytes.Repeat(c.block, c.size/len(c.block))}}
			_, err := Load(m, s.infoBare, optsFor(g))
			require.ErrorIs(t, err, ErrNotFound)
			msg := err.Error()
			assert.True(t, strings.Contains(msg, "gave up"), "%.500s", msg)
			assert.Less(t, len(msg), 16<<10, "error length")
			assert.Less(t, m.n, uint64(64<<20), "bytes read")
		})
	}
}

// TestExpandChecks checks that a whole expansion reports a broken marker
// or entry wherever in the table it is.
func TestExpandChecks(t *testing.T) {
	g := gens[5]
	s := build(g, makeSyms(g, 3000)) // 12 blocks
	for _, blk := range []int{1, 5, 11} {
		t.Run(fmt.Sprintf("bad marker %d", blk), func(t *testing.T) {
			m := &memMap{base: s.mem.base, data: append([]byte(nil), s.mem.data...)}
			ma := s.labels["kallsyms_markers"] + uint64(4*blk)
			g.bo.PutUint32(m.data[ma-m.base:], g.bo.Uint32(m.data[ma-m.base:])+1)
			_, err := Load(m, s.info, Options{Tables: TableAddrs{}})
			require.ErrorIs(t, err, ErrCorrupt)
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			// The marker, or the names block that no longer ends at it.
			inNames := fe.Addr >= s.labels["kallsyms_names"] && fe.Addr < s.labels["kallsyms_markers"]
			assert.True(t, fe.Addr == ma || inNames, "%v", err)
		})
		t.Run(fmt.Sprintf("bad entry in block %d", blk), func(t *testing.T) {
			m := &memMap{base: s.mem.base, data: append([]byte(nil), s.mem.data...)}
			at := s.labels["kallsyms_names"] + uint64(s.namesOff[256*blk+3])
			m.data[at-m.base] = 0 // a zero-length entry
			_, err := Load(m, s.info, Options{})
			require.ErrorIs(t, err, ErrCorrupt)
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
		})
	}
}
