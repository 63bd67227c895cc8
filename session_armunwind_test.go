package kdumpsyms

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/unwind"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestARMTablesCorpus: on every 32-bit ARM corpus guest, vmlinux's unwind
// index is found (6.1 through unwind_frame's code: its kallsyms lacks
// __start_unwind_idx), and where the symbol table names it, the search
// through code finds the same table (TestARMTablesThroughCode's check);
// every module of /proc/modules has its text's table on unwind_tables,
// named by the module that holds its text.
func TestARMTablesCorpus(t *testing.T) {
	ran := 0
	for _, g := range testutil.Corpus(t) {
		if g.ArchName() != "arm" {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			f, ok := g.OneDump()
			if !ok {
				t.Skipf("no dumps of %s: run testdata/vmcores/generate", g.Name)
			}
			paths, _ := g.DumpPaths(f)
			s, err := Open(Options{}, paths...)
			require.NoError(t, err)
			defer s.Close()
			ran++
			tabs, how, err := s.ARMTables()
			require.NoError(t, err)
			t.Logf("vmlinux index [%#x, %#x) (%d entries) from %s", tabs.Vmlinux.Start, tabs.Vmlinux.Stop, (tabs.Vmlinux.Stop-tabs.Vmlinux.Start)/8, how)
			if how == "the symbol table" {
				lo, hi, err := s.armText()
				require.NoError(t, err)
				kmem, _ := s.Kernel()
				start, stop, byCode, err := s.armIndexByCode(armIndexCheck{kmem: kmem, tgt: s.target(), lo: lo, hi: hi})
				require.NoError(t, err)
				assert.Equal(t, [2]uint64{tabs.Vmlinux.Start, tabs.Vmlinux.Stop}, [2]uint64{start, stop}, "found through %s", byCode)
			}
			mods, err := tabs.LoadModules()
			require.NoError(t, err)
			var names []string
			for _, m := range mods {
				assert.NotEmpty(t, m.Name, "the table of text [%#x, %#x) is in no module", m.TextStart, m.TextEnd)
				names = append(names, m.Name)
			}
			for _, m := range g.Modules(t) {
				assert.True(t, slices.Contains(names, m.Name), "no unwind table of %s", m.Name)
			}
			// At the first instruction of every module function
			// /proc/kallsyms lists, its module's table names that function
			// (a few share an entry: GCC's .part/.isra clones and the
			// like, and module text without unwind info).
			tabs.Modules, tabs.LoadModules = mods, nil
			kmem, _ := s.Kernel()
			funcs, exact, unsaved := 0, 0, 0
			for _, e := range g.Kallsyms(t) {
				if e.Module == "" || strings.HasPrefix(e.Module, "__builtin__") || e.Module == "bpf" || (e.Type != 't' && e.Type != 'T') || strings.HasPrefix(e.Name, "$") {
					continue
				}
				funcs++
				ent, err := unwind.ARMLookup(kmem, tabs, s.target(), e.Addr)
				if errors.Is(err, memory.ErrNotSaved) {
					unsaved++ // an extract keeps only the pages decoding read
					continue
				}
				if err != nil {
					t.Logf("%s [%s]: %v", e.Name, e.Module, err)
					continue
				}
				if ent.Func == e.Addr {
					exact++
				}
			}
			t.Logf("%d module tables; %d of %d module functions start an index entry; %d in unsaved pages", len(mods), exact, funcs, unsaved)
			require.NotZero(t, funcs)
			if unsaved == funcs {
				t.Skip("the dump holds none of the modules' indexes")
			}
			assert.GreaterOrEqual(t, exact*100, (funcs-unsaved)*99)
		})
	}
	if ran == 0 {
		t.Skip("no 32-bit ARM corpus dump")
	}
}
