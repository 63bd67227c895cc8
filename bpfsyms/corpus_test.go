package bpfsyms

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

func line(s symfinder.Symbol) string {
	return fmt.Sprintf("%016x %c %s\t[%s]", s.Addr, s.Kind, s.Name, s.Module)
}

func setLines(t testing.TB, s *Set) []string {
	var out []string
	require.NoError(t, s.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
		out = append(out, line(sym))
		return true
	}))
	return out
}

// corpusDump is one opened corpus dump with what the loaders need.
type corpusDump struct {
	kmem memory.Reader
	syms Symbols
	opt  Options
}

func openCorpusDump(t testing.TB, paths []string) *corpusDump {
	d, err := vmcore.Open(paths...)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	k, err := d.Kernel()
	require.NoError(t, err)
	res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{})
	require.NoError(t, err)
	return &corpusDump{kmem: k, syms: Symbols(modsyms.FromFinder(res.Finder())), opt: Options{PageSize: uint64(d.PageSize()), ByteOrder: d.Arch().ByteOrder, PointerSize: d.Arch().PtrSize}}
}

// TestCorpus reproduces, for every cached dump of every corpus guest, the
// ftrace, BPF and kprobes lines that end the guest's /proc/kallsyms, line
// for line and in order, and checks lookups inside and just past each BPF
// image.
func TestCorpus(t *testing.T) {
	found := false
	for _, g := range testutil.Corpus(t) {
		dumps := g.AvailableDumps()
		if len(dumps) == 0 {
			continue
		}
		found = true
		t.Run(g.Name, func(t *testing.T) {
			if !g.ExpectModules() {
				// TestSessionCorpus checks the error naming the symbol.
				t.Skipf("%s: no CONFIG_KALLSYMS_ALL, so no %s in kallsyms and no BTF struct layouts", g.Name, testutil.MissingSymbol)
			}
			var all []string
			pseudo := 0
			for _, e := range g.Kallsyms(t) {
				all = append(all, fmt.Sprintf("%016x %c %s\t[%s]", e.Addr, e.Type, e.Name, e.Module))
				if e.Kind == testutil.SymBPF || e.Kind == testutil.SymPseudo {
					pseudo++
				}
			}
			for _, f := range dumps {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					cd := openCorpusDump(t, paths)
					var got []string
					var bpf *Set
					fails := map[string]string{}
					for _, ff := range g.FinderFailures() {
						fails[ff.Finder] = ff.Contains
					}
					for i, load := range []func(memory.Reader, Symbols, Options) (*Set, error){LoadFtrace, LoadBPF, LoadKprobes} {
						s, err := load(cd.kmem, cd.syms, cd.opt)
						if want, ok := fails[[]string{FinderFtrace, FinderBPF, FinderKprobes}[i]]; ok {
							// A kernel without the list (no BPF JIT): an error naming it.
							require.ErrorContains(t, err, want)
							continue
						}
						require.NoError(t, err)
						got = append(got, setLines(t, s)...)
						if s.Name() == FinderBPF {
							bpf = s
						}
					}
					// The pseudo-module lines end the file; with no module
					// init functions saved by ftrace they are all of them.
					require.GreaterOrEqual(t, len(got), pseudo)
					require.LessOrEqual(t, len(got), len(all))
					assert.Equal(t, all[len(all)-len(got):], got)
					if j := g.Manifest.BPFJIT; j != nil && !*j {
						// No CONFIG_BPF_JIT: no list, and no [bpf] lines.
						require.NotNil(t, bpf)
						require.Equal(t, 0, bpf.Len())
					} else if bpf != nil {
						require.Equal(t, 3, bpf.Len(), "kds_alpha, kds_beta, kds_gamma")
						checkImages(t, bpf)
					}
				})
			}
		})
	}
	if !found {
		t.Skipf("no corpus dumps in %s: run testdata/vmcores/generate", testutil.CorpusCacheDir(t))
	}
}

// checkImages checks that every address of each BPF image resolves to it
// as %pS prints it and that the byte past its end does not.
func checkImages(t *testing.T, s *Set) {
	ix := s.Indexes()[0]
	for i := range ix.Len() {
		sym := ix.Symbol(i)
		require.True(t, strings.HasPrefix(sym.Name, "bpf_prog_"), sym.Name)
		require.NotZero(t, sym.Size, sym.Name)
		for _, off := range []uint64{0, 1, sym.Size / 2, sym.Size - 1} {
			var hit symfinder.Symbol
			n := 0
			require.NoError(t, s.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: sym.Addr + off}, func(h symfinder.Symbol) bool {
				hit = h
				n++
				return true
			}))
			require.Equal(t, 1, n)
			assert.Equal(t, fmt.Sprintf("%s+%#x/%#x [bpf]", sym.Name, off, sym.Size), hit.Format(sym.Addr+off))
		}
		_ = s.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: sym.Addr + sym.Size}, func(h symfinder.Symbol) bool {
			assert.NotEqual(t, sym.Name, h.Name, "%s: the byte past its end", sym.Name)
			return true
		})
	}
}
