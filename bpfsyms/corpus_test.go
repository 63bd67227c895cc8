package bpfsyms

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/coderef"
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
	all  symfinder.Finder
	arch string // the kernel's name, as vmcore.Arch.Name
	opt  Options
}

func openCorpusDump(t testing.TB, paths []string) *corpusDump {
	d, err := vmcore.Open(paths...)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	k, err := d.Kernel()
	require.NoError(t, err)
	// Lazily: the loaders look up a few names, which the kallsyms tests
	// check the lazy decoder answers as the expanded one does.
	res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{Lazy: true})
	require.NoError(t, err)
	return &corpusDump{kmem: k, syms: Symbols(modsyms.FromFinder(res.Finder())), all: res.Finder(), arch: d.Arch().Name, opt: Options{Target: d.Arch().Target}}
}

// TestCorpus reproduces, for a dump of every corpus guest, the ftrace,
// BPF and kprobes lines that end the guest's /proc/kallsyms, line for line
// and in order, and checks lookups inside and just past each BPF image. It
// reads the guest's one dump (every format with KDUMP_SYMS_THOROUGH=1):
// the loaders read the same kernel memory whatever the container, and
// TestSessionCorpus prints these lines from every format.
func TestCorpus(t *testing.T) {
	found := false
	for _, g := range testutil.Corpus(t) {
		dumps := g.SampleDumps()
		if len(dumps) == 0 {
			continue
		}
		found = true
		t.Run(g.Name, func(t *testing.T) {
			if !g.ExpectModules() {
				// The session finds the BTF by scan or infers the layouts,
				// and the heads through code: TestSessionCorpus.
				t.Skipf("%s: no CONFIG_KALLSYMS_ALL, so no %s in kallsyms: the session's layouts are needed", g.Name, testutil.MissingSymbol)
			}
			all := g.Kallsyms(t)
			pseudo := 0
			for _, e := range all {
				if e.Kind == testutil.SymBPF || e.Kind == testutil.SymPseudo {
					pseudo++
				}
			}
			for _, f := range dumps {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					cd := openCorpusDump(t, paths)
					opt := cd.opt
					if f != dumps[0] {
						// On the guest's first dump each loader reads the
						// BTF itself; here the three share one read of this
						// dump's BTF instead of each decoding its pages.
						start, _ := cd.syms("__start_BTF")
						stop, _ := cd.syms("__stop_BTF")
						lay, err := btflayout.FromMemory(cd.kmem, start, stop)
						require.NoError(t, err)
						opt.Layout = lay
					}
					var got []string
					var bpf *Set
					for _, load := range []func(memory.Reader, Symbols, Options) (*Set, error){LoadFtrace, LoadBPF, LoadKprobes} {
						s, err := load(cd.kmem, cd.syms, opt)
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
					var want []string
					for _, e := range all[len(all)-len(got):] {
						want = append(want, fmt.Sprintf("%016x %c %s\t[%s]", e.Addr, e.Type, e.Name, e.Module))
					}
					assert.Equal(t, want, got)
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

// TestCorpusThroughCode hides the data symbols of every corpus kernel that
// has them (KALLSYMS_ALL) and checks that the loaders, finding each list
// head through the code of the functions that use it, find the very
// address the symbol table gives and read the same lines: the x86_64,
// arm64 and s390x decoders of internal/coderef on real kernels (the
// kernels without KALLSYMS_ALL, arm64 and i386, are TestSessionCorpus's).
func TestCorpusThroughCode(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		dumps := g.AvailableDumps()
		if len(dumps) == 0 || !g.ExpectModules() {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			paths, _ := g.DumpPaths(dumps[0])
			cd := openCorpusDump(t, paths)
			textOnly := textSymbols(t, cd)
			arch := cd.arch
			code := &Code{
				Func: func(name string) (uint64, uint64, bool) {
					e, ok := textOnly[name]
					return e[0], e[1], ok
				},
				Refs: func(pc uint64, b []byte) ([]uint64, error) { return coderef.Refs(arch, pc, b) },
			}
			hidden := func(name string) (uint64, bool) {
				if e, ok := textOnly[name]; ok {
					return e[0], true
				}
				return 0, false
			}
			opt := cd.opt
			opt.Code = code
			start, ok1 := cd.syms("__start_BTF")
			stop, ok2 := cd.syms("__stop_BTF")
			require.True(t, ok1 && ok2)
			lay, err := btflayout.FromMemory(cd.kmem, start, stop)
			require.NoError(t, err)
			opt.Layout = lay // the BTF's bounds are data symbols too
			// The reference reads the same BTF: TestCorpus checks the
			// loaders finding it by symbol.
			wantOpt := cd.opt
			wantOpt.Layout = lay
			for _, load := range []func(memory.Reader, Symbols, Options) (*Set, error){LoadFtrace, LoadBPF, LoadKprobes} {
				want, err := load(cd.kmem, cd.syms, wantOpt)
				require.NoError(t, err)
				got, err := load(cd.kmem, hidden, opt)
				if errors.Is(err, memory.ErrNotSaved) && g.IsExtract(dumps[0]) {
					t.Skipf("%s: the extract lacks the code of the functions searched (made before extract-corpus kept it): %v", want.Name(), err)
				}
				require.NoError(t, err, want.Name())
				assert.Equal(t, setLines(t, want), setLines(t, got), want.Name())
				byName := map[string]uint64{}
				for _, h := range want.Heads() {
					byName[h.Symbol] = h.Addr
				}
				// Heads as many as the symbol table gives: none for the
				// BPF list of a kernel without the JIT (s390x).
				require.Len(t, got.Heads(), len(want.Heads()), want.Name())
				for _, h := range got.Heads() {
					assert.Contains(t, h.How, "the code of ", h.Symbol)
					if a, ok := byName[h.Symbol]; ok {
						assert.Equal(t, fmt.Sprintf("%#x", a), fmt.Sprintf("%#x", h.Addr), h.Symbol)
					} else {
						a, ok := cd.syms(h.Symbol)
						require.True(t, ok, h.Symbol)
						assert.Equal(t, fmt.Sprintf("%#x", a), fmt.Sprintf("%#x", h.Addr), h.Symbol)
					}
				}
			}
		})
	}
}

// textSymbols returns the extent of every text symbol of the dump's
// kallsyms, and the section bounds a kernel without KALLSYMS_ALL still
// lists: what such a kernel's symbol table would hold.
func textSymbols(t *testing.T, cd *corpusDump) map[string][2]uint64 {
	// What scripts/kallsyms keeps without KALLSYMS_ALL: the symbols in
	// [_stext, _etext] and [_sinittext, _einittext], whatever their
	// letter (7.x prints many .data symbols 't' or 'T': jiffies,
	// bpf_kallsyms).
	var ranges [][2]uint64
	for _, r := range [][2]string{{"_stext", "_etext"}, {"_sinittext", "_einittext"}} {
		lo, ok1 := cd.syms(r[0])
		hi, ok2 := cd.syms(r[1])
		require.True(t, ok1 && ok2, "%s, %s", r[0], r[1])
		ranges = append(ranges, [2]uint64{lo, hi})
	}
	out := map[string][2]uint64{}
	require.NoError(t, cd.all.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		in := false
		for _, r := range ranges {
			in = in || s.Addr >= r[0] && s.Addr <= r[1]
		}
		if _, dup := out[s.Name]; in && !dup && s.Module == "" {
			out[s.Name] = [2]uint64{s.Addr, s.Addr + s.Size}
		}
		return true
	}))
	return out
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
