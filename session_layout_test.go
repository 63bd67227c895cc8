package kdumpsyms_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// TestModulesWithoutKallsymsAll: on every corpus guest whose kallsyms has
// no modules symbol (no CONFIG_KALLSYMS_ALL) but whose /proc/kallsyms lists
// module symbols, the session finds the list by scan and the layouts (BTF
// by scan, or inferred) and reproduces the module block line for line and
// /proc/modules in name, size and address; where the BTF was found, the
// output is the same with inference forced. It reads the guest's one dump:
// the scans and the inference read the same kernel memory whatever the
// container, and TestSessionCorpus decodes the module block from every
// format.
func TestModulesWithoutKallsymsAll(t *testing.T) {
	ran := false
	for _, g := range testutil.Corpus(t) {
		entries := g.Kallsyms(t)
		if slices.ContainsFunc(entries, func(e testutil.KallsymsEntry) bool { return e.Kind == testutil.SymVmlinux && e.Name == "modules" }) {
			continue // the list head is in kallsyms: no scan
		}
		var want []string
		for _, e := range entries {
			if e.Kind == testutil.SymModule {
				want = append(want, fmt.Sprintf("%x %c %s [%s]", e.Addr, e.Type, e.Name, e.Module))
			}
		}
		if len(want) == 0 {
			continue
		}
		f, ok := g.OneDump()
		if !ok {
			continue
		}
		t.Run(g.Name+"/"+string(f), func(t *testing.T) {
			var lines [2][]string
			for i, mode := range []kdumpsyms.LayoutMode{kdumpsyms.LayoutsAuto, kdumpsyms.LayoutsInfer} {
				var s *kdumpsyms.Session
				if mode == kdumpsyms.LayoutsAuto { // Options{}: the shared session
					s, _ = oneDumpSession(t, g, false)
				} else {
					paths, _ := g.DumpPaths(f)
					o, err := kdumpsyms.Open(kdumpsyms.Options{Layouts: mode}, paths...)
					require.NoError(t, err)
					defer o.Close()
					s = o
				}
				set, err := s.Modules()
				if errors.Is(err, memory.ErrNotSaved) && g.IsExtract(f) {
					t.Skipf("the extract lacks pages the scans read (made before them: re-run extract-corpus): %v", err)
				}
				require.NoError(t, err)
				ran = true
				_, how, _ := s.Layouts()
				_, headHow, _ := s.ModuleListHead()
				t.Logf("layouts: %s; list head: %s", how, headHow)
				require.NoError(t, set.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
					lines[i] = append(lines[i], fmt.Sprintf("%x %c %s [%s]", s.Addr, s.Kind, s.Name, s.Module))
					return true
				}))
				require.LessOrEqual(t, len(lines[i]), len(want))
				assert.Equal(t, want[:len(lines[i])], lines[i])
				pm := g.Modules(t)
				require.Len(t, set.Modules(), len(pm))
				for j, m := range set.Modules() {
					assert.Equal(t, pm[j].Name, m.Name)
					assert.Equal(t, pm[j].Size, m.Size, m.Name)
					assert.Equal(t, pm[j].Addr, m.TextBase, m.Name)
				}
			}
			assert.Equal(t, lines[0], lines[1], "inferred layouts give other lines")
		})
	}
	if !ran {
		t.Skip("no corpus dump of a guest without KALLSYMS_ALL has module pages")
	}
}
