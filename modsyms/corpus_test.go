package modsyms

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// truthSymbols resolves vmlinux symbols from the guest's captured
// /proc/kallsyms (until kallsyms decoding is wired in here, the addresses
// modsyms needs: modules, __start_BTF, __stop_BTF).
func truthSymbols(entries []testutil.KallsymsEntry) Symbols {
	m := map[string]uint64{}
	for _, e := range entries {
		if e.Kind == testutil.SymVmlinux {
			if _, dup := m[e.Name]; !dup {
				m[e.Name] = e.Addr
			}
		}
	}
	return func(name string) (uint64, bool) { a, ok := m[name]; return a, ok }
}

// moduleText renders what modsyms found as /proc/kallsyms lines.
func moduleText(t testing.TB, set *Set) string {
	var out []byte
	err := set.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		out = appendModuleLine(out, s.Addr, byte(s.Kind), s.Name, s.Module)
		return true
	})
	require.NoError(t, err)
	return string(out)
}

// appendModuleLine appends a module symbol's /proc/kallsyms line: what
// fmt's "%016x %c %s\t[%s]\n" prints, without fmt's cost on the million
// lines of a riscv64 guest.
func appendModuleLine(b []byte, addr uint64, kind byte, name, module string) []byte {
	var hex [16]byte
	h := strconv.AppendUint(hex[:0], addr, 16)
	for range 16 - len(h) {
		b = append(b, '0')
	}
	b = append(append(b, h...), ' ', kind, ' ')
	b = append(append(b, name...), "\t["...)
	return append(append(b, module...), "]\n"...)
}

// checkModuleBlock checks that the symbols of set, in order, are the
// first lines of want (address, type, name and module alike) and returns
// how many there were. It compares fields, not formatted lines: a
// riscv64 guest has a million module symbols.
func checkModuleBlock(t *testing.T, want []testutil.KallsymsEntry, set *Set) int {
	t.Helper()
	n := 0
	err := set.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		if n >= len(want) {
			t.Errorf("more module symbols than /proc/kallsyms' %d module lines: %s", len(want), moduleLine(s.Addr, byte(s.Kind), s.Name, s.Module))
			return false
		}
		if w := want[n]; w.Addr != s.Addr || w.Type != byte(s.Kind) || w.Name != s.Name || w.Module != s.Module {
			t.Errorf("module line %d: want %q, got %q", n+1, moduleLine(w.Addr, w.Type, w.Name, w.Module), moduleLine(s.Addr, byte(s.Kind), s.Name, s.Module))
			return false
		}
		n++
		return true
	})
	require.NoError(t, err)
	return n
}

// moduleLine is one line of appendModuleLine, without its newline.
func moduleLine(addr uint64, kind byte, name, module string) string {
	return strings.TrimSuffix(string(appendModuleLine(nil, addr, kind, name, module)), "\n")
}

// firstDiff describes the first line where two texts differ.
func firstDiff(want, got string) string {
	w := strings.SplitAfter(want, "\n")
	g := strings.SplitAfter(got, "\n")
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			return fmt.Sprintf("line %d: want %q, got %q", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("%d lines wanted, %d got", len(w), len(g))
}

// TestCorpus reproduces, for a dump of every corpus guest, the module part
// of the guest's /proc/kallsyms line for line and its /proc/modules (name,
// size, refcount, users, state, address), with struct layouts from the BTF
// inside the dump. It reads the guest's one dump (every format with
// KDUMP_SYMS_THOROUGH=1): the walk reads the same kernel memory whatever
// the container, and TestSessionCorpus prints the module block from every
// format.
func TestCorpus(t *testing.T) {
	any := false
	for _, g := range testutil.Corpus(t) {
		dumps := g.SampleDumps()
		if len(dumps) == 0 {
			continue
		}
		any = true
		t.Run(g.Name, func(t *testing.T) {
			entries := g.Kallsyms(t)
			// The module block: the run of module lines after the core
			// symbols. ftrace's saved init-function names (printed with
			// their module's name) follow it and are not modsyms'.
			var want []testutil.KallsymsEntry
			for i, e := range entries {
				if e.Kind == testutil.SymModule {
					want = entries[i:]
					for j, e := range want {
						if e.Kind != testutil.SymModule {
							want = want[:j]
							break
						}
					}
					break
				}
			}
			procMods := g.Modules(t)
			syms := truthSymbols(entries)
			for _, f := range dumps {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					d, err := vmcore.Open(paths...)
					require.NoError(t, err)
					defer d.Close()
					k, err := d.Kernel()
					require.NoError(t, err)
					// End to end: vmlinux addresses from kallsyms decoded out
					// of the dump itself, checked against the captured ones.
					use := syms
					if !g.ExpectModules() {
						// No CONFIG_KALLSYMS_ALL: kallsyms has text symbols
						// only, so neither the list head nor the BTF.
						res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{Lazy: true})
						require.NoError(t, err)
						dec := FromFinder(res.Finder())
						for _, n := range []string{"modules", "__start_BTF", "__stop_BTF"} {
							_, ok := dec(n)
							assert.False(t, ok, n)
						}
						_, err = Load(k, dec, Options{Target: d.Arch().Target})
						var mse *vmcoreinfo.MissingSymbolError
						require.ErrorAs(t, err, &mse)
						assert.Contains(t, mse.Symbols, testutil.MissingSymbol)
						return
					}
					// Lazily: three names are looked up, and the kallsyms
					// tests check the lazy decoder against the expanded one.
					if res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{Lazy: true}); err == nil {
						dec := FromFinder(res.Finder())
						for _, n := range []string{"modules", "__start_BTF", "__stop_BTF"} {
							a, ok := dec(n)
							w, _ := syms(n)
							require.True(t, ok, n)
							require.Equal(t, w, a, n)
						}
						use = dec
					} else {
						t.Logf("kallsyms.Load: %v; using the captured /proc/kallsyms for vmlinux addresses", err)
					}
					set, err := Load(k, use, Options{Target: d.Arch().Target})
					require.NoError(t, err)

					// What modsyms found is the module block: the
					// captured lines up to its end.
					n := checkModuleBlock(t, want, set)
					if extra := want[n:]; len(extra) > 0 {
						t.Logf("%d module-named lines after the module block (ftrace init names), e.g. %s", len(extra), moduleLine(extra[0].Addr, extra[0].Type, extra[0].Name, extra[0].Module))
					}
					// The module block ends where the next module's name
					// would not continue the list: check that no module in
					// /proc/modules is missing instead.
					require.Len(t, set.Modules(), len(procMods))
					for i, pm := range procMods {
						m := set.Modules()[i]
						assert.Equal(t, pm.Name, m.Name)
						assert.Equal(t, pm.Size, m.Size, "size of %s", pm.Name)
						assert.Equal(t, pm.Addr, m.TextBase, "address of %s", pm.Name)
						assert.Equal(t, pm.State, m.State.String(), "state of %s", pm.Name)
						if m.HasRefCount {
							assert.Equal(t, int64(pm.Refcount), m.RefCount, "refcount of %s", pm.Name)
						}
						if m.Deps != nil {
							var deps []string
							for _, d := range pm.Deps {
								if d != "[permanent]" {
									deps = append(deps, d)
								}
							}
							assert.Equal(t, strings.Join(deps, ","), strings.Join(m.Deps, ","), "users of %s", pm.Name)
						}
						assert.NoError(t, m.Err)
					}
				})
			}
		})
	}
	if !any {
		t.Skipf("no corpus dumps in %s: run testdata/vmcores/generate", testutil.CorpusCacheDir(t))
	}
}

// TestIssue28UsersUnread: a module whose users list (struct module_use) is
// on a page the dump lacks keeps the users read before the break, says the
// rest are unknown with the page (DepsErr), and its symbols are unharmed;
// before, the list printed as "no users". On a real capture of 6.12 amd64
// (makedumpfile -d 31) /proc/modules said "btrfs,xfs," and kdump-syms "-".
func TestIssue28UsersUnread(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths := g.RequireOneDump(t)
	d, err := vmcore.Open(paths...)
	require.NoError(t, err)
	defer d.Close()
	k, err := d.Kernel()
	require.NoError(t, err)
	syms := truthSymbols(g.Kallsyms(t))
	opt := Options{Target: d.Arch().Target}
	set, err := Load(k, syms, opt)
	require.NoError(t, err)
	start, _ := syms("__start_BTF")
	stop, _ := syms("__stop_BTF")
	lay, err := btflayout.FromMemory(k, start, stop)
	require.NoError(t, err)
	mod, err := lay.Struct("module", "source_list")
	require.NoError(t, err)
	use, err := lay.Struct("module_use", "source_list")
	require.NoError(t, err)
	srcList, _ := mod.Field("source_list")
	useList, _ := use.Field("source_list")
	tested := 0
	for _, m := range set.Modules() {
		if len(m.Deps) < 2 {
			continue
		}
		// The second user's struct module_use: the first is read, then the
		// walk breaks.
		first, err := memory.Uint64(k, d.Arch().ByteOrder, m.Addr+srcList.Offset)
		require.NoError(t, err)
		second, err := memory.Uint64(k, d.Arch().ByteOrder, first)
		require.NoError(t, err)
		page := (second - useList.Offset) &^ 4095
		if page == (first-useList.Offset)&^4095 {
			continue // both on one page: nothing is read before the break
		}
		got, err := Load(testutil.Holes(k, memory.SpaceKernelVirtual, map[uint64]bool{page >> 12: true}), syms, opt)
		require.NoError(t, err, "the symbols do not depend on the users list")
		gm, ok := got.Module(m.Name)
		require.True(t, ok)
		require.Error(t, gm.DepsErr, m.Name)
		var fe *memory.FaultError
		require.ErrorAs(t, gm.DepsErr, &fe)
		assert.Equal(t, page, fe.Addr&^4095)
		assert.ErrorIs(t, gm.DepsErr, memory.ErrNotSaved)
		assert.Equal(t, m.Deps[:1], gm.Deps, "the users read before the break")
		assert.NoError(t, gm.Err)
		assert.Equal(t, m.Symbols.Len(), gm.Symbols.Len())
		tested++
	}
	if tested == 0 {
		t.Skip("no module with two users on two pages in this dump")
	}
}
