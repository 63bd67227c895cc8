package vtop_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleNameOffset is offsetof(struct module, name) on x86_64 since v2.6:
// enum module_state state (4 bytes + 4 padding), struct list_head list (16).
const moduleNameOffset = 24

// TestCorpus checks translation on every real dump of the corpus
// (testdata/vmcores): linux_banner holds `uname -r`, every loaded module's
// struct module (its __this_module symbol) names it, and every text symbol
// of /proc/kallsyms translates, the walk agreeing with the fast paths.
// It opens dumps through vmcore, which vtop cannot import: an external test.
func TestCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("corpus dumps are slow to open; skipped with -short")
	}
	ran := false
	for _, g := range testutil.Corpus(t) {
		t.Run(g.Name, func(t *testing.T) {
			formats := g.AvailableDumps()
			if len(formats) == 0 {
				g.RequireDump(t, testutil.DumpQEMUELF) // skips with the generate hint
			}
			syms := g.Kallsyms(t)
			mods := g.Modules(t)
			uname := g.Uname(t)
			for _, f := range formats {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					d, err := vmcore.Open(paths...)
					require.NoError(t, err)
					defer d.Close()
					tr, err := d.Translator()
					require.NoError(t, err)
					ran = true
					checkDump(t, tr, syms, mods, uname, g.IsExtract(f), g.Arch(), g.ExpectModules())
					if testing.Verbose() {
						t.Logf("%s/%s:\n%s", g.Name, f, tr.Describe())
					}
				})
			}
		})
	}
	if !ran {
		t.Log("no corpus dump was available: run testdata/vmcores/generate")
	}
}

// checkDump checks translation against the ground truth. An extract (see
// testutil.IsExtract) holds only the pages symbol decoding reads and the
// page tables of every symbol: reads of other data, and walks through the
// kernel-text tables the fast path spares, may fail there as not saved.
func checkDump(t *testing.T, tr vtop.Translator, syms []testutil.KallsymsEntry, mods []testutil.ProcModule, uname string, extract bool, arch string, fullKallsyms bool) {
	absent := func(err error) bool { return extract && errors.Is(err, memory.ErrNotSaved) }
	byName := map[string]uint64{}
	thisModule := map[string]uint64{}
	for _, s := range syms {
		if s.Module == "" {
			byName[s.Name] = s.Addr
		} else if s.Name == "__this_module" {
			thisModule[s.Module] = s.Addr
		}
	}

	// Data symbols need CONFIG_KALLSYMS_ALL (not in Debian's arm64 6.1).
	if banner, ok := byName["linux_banner"]; ok {
		if s, err := memory.CString(tr, banner, 512); !absent(err) {
			require.NoError(t, err)
			assert.Contains(t, s, uname)
		}
	} else {
		require.False(t, fullKallsyms, "linux_banner in ground truth")
	}
	// arm64 unmaps the freed __init region (text and exit text) after boot.
	initLo, initHi := byName["__init_begin"], byName["__init_end"]
	if initHi == 0 {
		initLo, initHi = byName["_sinittext"], byName["_einittext"]
	}
	freedInit := func(s testutil.KallsymsEntry, err error) bool {
		return arch == "arm64" && s.Module == "" && s.Addr >= initLo && s.Addr < initHi && errors.Is(err, vtop.ErrNotMapped)
	}
	unmapped := 0

	// page_offset_base found by the walk equals the kernel's variable.
	if pob, ok := byName["page_offset_base"]; ok {
		if v, err := memory.Uint64(tr, binary.LittleEndian, pob); !absent(err) { // the corpus is amd64 only for now
			require.NoError(t, err)
			assert.Equal(t, v, tr.Layout().DirectMap, "page_offset_base")
		}
	}

	require.NotEmpty(t, mods)
	for _, m := range mods {
		addr, ok := thisModule[m.Name]
		if !ok && !fullKallsyms {
			// Module data symbols need KALLSYMS_ALL too: the module's
			// base (its text) at least is mapped.
			if _, err := tr.Translate(m.Addr); !absent(err) {
				assert.NoError(t, err, m.Name)
			}
			continue
		}
		if !assert.True(t, ok, "__this_module of %s", m.Name) {
			continue
		}
		name, err := memory.CString(tr, addr+moduleNameOffset, 56)
		if assert.NoError(t, err, m.Name) {
			assert.Equal(t, m.Name, name)
		}
	}

	var bad []string
	text, walked := 0, 0
	for i, s := range syms {
		if s.Type != 't' && s.Type != 'T' {
			continue
		}
		text++
		pa, err := tr.Translate(s.Addr)
		if freedInit(s, err) {
			unmapped++
			continue
		}
		// Extracts lack the page tables of what decoding did not reach:
		// modules when their list cannot be found (no KALLSYMS_ALL), and
		// arm64's head text before _stext (outside the kimage_voffset fast
		// path, so walked).
		if absent(err) && (s.Module != "" && !fullKallsyms || arch == "arm64" && s.Module == "" && s.Addr < byName["_stext"]) {
			continue
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%#x %s [%s]: %v", s.Addr, s.Name, s.Module, err))
			continue
		}
		if i%37 == 0 { // a sample through the walk alone
			walked++
			wpa, err := vtop.WalkForTest(tr, s.Addr)
			if absent(err) || freedInit(s, err) {
				continue
			}
			if err != nil || wpa != pa {
				bad = append(bad, fmt.Sprintf("%#x %s: walk %#x (%v), translate %#x", s.Addr, s.Name, wpa, err, pa))
			}
		}
	}
	assert.Empty(t, bad, "%d of %d text symbols failed; first: %s", len(bad), text, strings.Join(bad[:min(len(bad), 10)], "\n"))
	t.Logf("%d text symbols translated (%d also walked, %d in the unmapped init region), %d modules named", text, walked, unmapped, len(mods))
}
