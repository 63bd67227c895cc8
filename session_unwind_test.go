package kdumpsyms_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	kdumpsyms "github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/unwind"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestORCModuleTablesCorpus: on every x86_64 corpus dump, each module's
// ORC tables are found through struct module's arch, and at the first
// instruction of the module functions /proc/kallsyms lists they say what
// the compiler guarantees there: a call frame whose return address is at
// sp (CFA = sp+8). Kernels with .orc_header (6.4+) name a known format.
func TestORCModuleTablesCorpus(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		if g.ArchName() != "x86_64" {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			s, _ := oneDumpSession(t, g, false)
			tabs, err := s.ORCTables()
			require.NoError(t, err)
			if tabs.Header != nil {
				_, err := unwind.ORCFormatForHeader(tabs.Header)
				assert.NoError(t, err)
			}
			if !g.ExpectModules() {
				return
			}
			// The module tables are read on first need; ask for them.
			require.NotNil(t, tabs.LoadModules)
			tabs.Modules, tabs.ModulesErr = tabs.LoadModules()
			require.NoError(t, tabs.ModulesErr)
			require.NotEmpty(t, tabs.Modules)
			kmem, err := s.Kernel()
			require.NoError(t, err)
			funcs, atEntry, unsaved := 0, 0, 0
			seen := map[string]bool{}
			for _, e := range g.Kallsyms(t) {
				if e.Module == "" || e.Module == "bpf" || strings.HasPrefix(e.Module, "__builtin__") || strings.HasPrefix(e.Name, "__pfx_") || (e.Type != 't' && e.Type != 'T') ||
					strings.Contains(e.Name, ".cold") { // a function's cold part: no entry, its caller's frame

					continue
				}
				seen[e.Module] = true
				funcs++
				o, err := unwind.ORCLookup(kmem, tabs, e.Addr)
				if errors.Is(err, memory.ErrNotSaved) {
					unsaved++ // an extract keeps only the pages decoding read
					continue
				}
				if err != nil {
					t.Logf("%s [%s]: %v", e.Name, e.Module, err)
					continue
				}
				if o.Type == "call" && o.SPBase == "sp" && o.SPOffset == 8 {
					atEntry++
				}
			}
			require.NotZero(t, funcs)
			t.Logf("%d module text regions with tables; %d of %d module functions (%d modules) have CFA = sp+8 at entry; %d in unsaved pages", len(tabs.Modules), atEntry, funcs, len(seen), unsaved)
			if unsaved == funcs {
				t.Skip("the dump holds none of the modules' ORC tables")
			}
			assert.GreaterOrEqual(t, atEntry*100, (funcs-unsaved)*99)
		})
	}
}

// noArch is a layout source without struct mod_arch_specific, as inferred
// layouts are.
type noArch struct{}

func (noArch) Describe() string { return "a table without mod_arch_specific" }
func (noArch) Struct(name string, need ...string) (*btflayout.Struct, error) {
	return nil, fmt.Errorf("struct %s: %w", name, btflayout.ErrNotFound)
}
func (noArch) Enum(name string) (map[string]int64, error) { return nil, btflayout.ErrNotFound }

// TestORCModulesNeedBTF: without the layout of struct mod_arch_specific,
// vmlinux's tables are still found and the reason module frames cannot be
// followed names BTF.
func TestORCModulesNeedBTF(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, testutil.ShortGuest)
	formats := g.AvailableDumps()
	if len(formats) == 0 {
		t.Skipf("no dumps of %s", g.Name)
	}
	paths, _ := g.DumpPaths(formats[0])
	s, err := kdumpsyms.Open(kdumpsyms.Options{Layout: noArch{}}, paths...)
	require.NoError(t, err)
	defer s.Close()
	tabs, err := s.ORCTables()
	require.NoError(t, err)
	require.NotNil(t, tabs.LoadModules)
	tabs.Modules, tabs.ModulesErr = tabs.LoadModules()
	assert.Empty(t, tabs.Modules)
	require.Error(t, tabs.ModulesErr)
	var ne *kdumpsyms.NeedsError
	require.ErrorAs(t, tabs.ModulesErr, &ne)
	assert.Equal(t, kdumpsyms.SourceModuleORC, ne.Source)
	assert.Equal(t, kdumpsyms.NeedBTF, ne.Needs)
	errshape.Require(t, tabs.ModulesErr)
	assert.Len(t, tabs.Header, unwind.ORCHeaderSize, "6.12 has .orc_header")
}
