package kallsyms

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// TestCorpus decodes a real dump of every corpus guest and compares the
// result with the vmlinux part of the guest's /proc/kallsyms line for
// line: once with the tables from VMCOREINFO where the kernel exports them
// (v6.0+), once by scanning the kernel image as for kernels that do not
// (every dump; the Debian 5.10 ones have no other way), and lazily. It
// reads the guest's one dump (every format with KDUMP_SYMS_THOROUGH=1):
// the decoder reads the same kernel memory whatever the container, and
// TestSessionCorpus decodes these tables from every format.
func TestCorpus(t *testing.T) {
	any := false
	for _, g := range testutil.Corpus(t) {
		dumps := g.SampleDumps()
		if len(dumps) == 0 {
			continue
		}
		any = true
		t.Run(g.Name, func(t *testing.T) {
			want := g.Kallsyms(t)
			for i, e := range want {
				if e.Kind != testutil.SymVmlinux {
					want = want[:i]
					break
				}
			}
			for _, f := range dumps {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					d, err := vmcore.Open(paths...)
					require.NoError(t, err)
					defer d.Close()
					k, err := d.Kernel()
					require.NoError(t, err)
					info := d.Info()
					opt := Options{Target: memory.Target{ByteOrder: d.Arch().ByteOrder, PtrSize: d.Arch().PtrSize}}
					var whole *Result
					for _, mode := range []string{"vmcoreinfo", "scan"} {
						o := opt
						if mode == "scan" && hasVmcoreinfoTables(info) && g.IsExtract(f) {
							// An extract holds the tables VMCOREINFO names,
							// not the image a scan reads around them.
							continue
						}
						if mode == "scan" {
							// Hide the kallsyms lines: locate as for < v6.0.
							o.Tables = TableAddrs{}
							info = stripKallsyms(t, info)
						} else if !hasVmcoreinfoTables(info) {
							continue
						}
						start := time.Now()
						res, err := Load(k, info, o)
						require.NoError(t, err, mode)
						t.Logf("%s: %v\n%s", mode, time.Since(start), res.Describe())
						require.Equal(t, Source(mode), res.Layout.Source)
						checkLines(t, want, res.Index, mode)
						whole = res
					}
					if f != dumps[0] {
						// Lazy against whole depends on the kernel's
						// tables alone: once per guest.
						return
					}
					o := opt
					o.Lazy = true
					lres, err := Load(k, d.Info(), o)
					require.NoError(t, err)
					compareCorpus(t, whole.Index, lres.Lazy)
				})
			}
		})
	}
	if !any {
		t.Skipf("no corpus dumps in %s: run testdata/vmcores/generate", testutil.CorpusCacheDir(t))
	}
}

// checkLines checks that f lists the symbols of want, in order, with the
// address, type and name of each: what /proc/kallsyms' lines show. It
// compares fields rather than formatted lines (hundreds of thousands per
// dump), formatting only the line it reports.
func checkLines(t *testing.T, want []testutil.KallsymsEntry, f symfinder.Finder, mode string) {
	t.Helper()
	line := func(addr uint64, kind byte, name string) string {
		return strings.TrimSuffix(string(appendLine(nil, addr, kind, name, 16)), "\n")
	}
	n := 0
	var bad string
	err := f.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		if n >= len(want) {
			bad = fmt.Sprintf("more symbols than /proc/kallsyms' %d: %q", len(want), line(s.Addr, byte(s.Kind), s.Name))
			return false
		}
		if w := want[n]; w.Addr != s.Addr || w.Type != byte(s.Kind) || w.Name != s.Name {
			bad = fmt.Sprintf("line %d: want %q, got %q", n+1, line(w.Addr, w.Type, w.Name), line(s.Addr, byte(s.Kind), s.Name))
			return false
		}
		n++
		return true
	})
	require.NoError(t, err, mode)
	if bad == "" && n != len(want) {
		bad = fmt.Sprintf("%d symbols, /proc/kallsyms has %d", n, len(want))
	}
	if bad != "" {
		t.Fatalf("%s: %s", mode, bad)
	}
}

// compareCorpus checks lazy == whole on a sample of real symbols.
func compareCorpus(t *testing.T, ix *symfinder.Index, lz *Lazy) {
	require.Equal(t, ix.Len(), lz.Len())
	for i := 0; i < ix.Len(); i += 97 {
		s := ix.Symbol(i)
		for _, q := range []symfinder.Query{
			{Kind: symfinder.ByAddr, Addr: s.Addr},
			{Kind: symfinder.ByAddr, Addr: s.Addr + 1},
			{Kind: symfinder.ByName, Name: s.Name},
		} {
			requireSameSyms(t, collect(t, ix, q), collect(t, lz, q), "%v %#x %s", q.Kind, q.Addr, q.Name)
		}
	}
	// Every symbol, in order, compared as it streams against the index's
	// own order (not two slices of 100k+ symbols compared by reflection).
	i := 0
	err := lz.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		if i >= ix.Len() {
			t.Fatalf("lazy has more than the index's %d symbols", ix.Len())
		}
		if w := ix.Symbol(i); w != s {
			require.Equal(t, w, s, "symbol %d", i)
		}
		i++
		return true
	})
	require.NoError(t, err)
	require.Equal(t, ix.Len(), i)
}

func stripKallsyms(t *testing.T, in *vmcoreinfo.Info) *vmcoreinfo.Info {
	var b strings.Builder
	for _, l := range in.Lines() {
		if strings.HasPrefix(l.Key, "SYMBOL(kallsyms_") {
			continue
		}
		b.WriteString(l.Key + "=" + l.Value + "\n")
	}
	out, err := vmcoreinfo.Parse([]byte(b.String()))
	require.NoError(t, err)
	return out
}

// TestTokenPaths checks, on every corpus kernel's own tables, that the
// unchecked fast path of token expansion and the careful path give the same
// bytes for every names entry.
func TestTokenPaths(t *testing.T) {
	any := false
	for _, g := range testutil.Corpus(t) {
		dumps := g.AvailableDumps()
		if len(dumps) == 0 {
			continue
		}
		any = true
		t.Run(g.Name, func(t *testing.T) {
			paths, _ := g.DumpPaths(dumps[0])
			d, err := vmcore.Open(paths...)
			require.NoError(t, err)
			defer d.Close()
			k, err := d.Kernel()
			require.NoError(t, err)
			res, err := Load(k, d.Info(), Options{Target: memory.Target{ByteOrder: d.Arch().ByteOrder, PtrSize: d.Arch().PtrSize}, Lazy: true})
			require.NoError(t, err)
			tb := res.Lazy.t
			require.Positive(t, tb.tok.room, "the fast path is off for this token table")
			names, err := readChunked(tb.r, tb.lay.Names.Addr, uint64(tb.namesLen), "kallsyms_names")
			require.NoError(t, err)
			fast := make([]byte, 0, maxExpanded+tb.tok.room*maxCodes)
			off := 0
			for i := range tb.n {
				codes, next, ok := entry(names, off, tb.big)
				if !ok {
					t.Fatalf("entry %d: bad length", i)
				}
				fast = tb.tok.expand(fast[:0], names[codes:next])
				careful := tb.tok.expand(make([]byte, 0), names[codes:next])
				if string(careful) != string(fast) {
					t.Fatalf("entry %d: fast path gives %q, careful %q", i, fast, careful)
				}
				off = next
			}
		})
	}
	if !any {
		t.Skipf("no corpus dumps in %s: run testdata/vmcores/generate", testutil.CorpusCacheDir(t))
	}
}
