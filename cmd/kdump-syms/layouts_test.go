package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// TestLayoutSources: on corpus guests with BTF, `kdump-syms all` gives the
// same bytes as with the dump's own BTF (the guest's /proc/kallsyms, which
// TestAllCorpus checks) with the layouts inferred (--layouts infer), read
// from a saved BTF blob (--btf) and from a layout table (--layout), and
// info says how they were found.
//
// What the layout sources depend on is the kernel's struct module: run on
// 5.10 (one core_layout) and 6.12 (mem[]). modsyms' TestCorpusInferred
// checks the inferred layouts of every guest with BTF, and btflayout's
// TestRawMatchesCiliumCorpus reads every guest's BTF blob (big-endian
// s390x's too).
func TestLayoutSources(t *testing.T) {
	testutil.SkipShort(t, "the layout sources themselves run on the short guest in their packages (modsyms' TestCorpusInferred; btflayout's TestTable and TestBTFHost), the dump's own BTF in TestAllCorpus")
	t.Parallel()
	for _, c := range sampleDumps(t, "deb11-5.10-amd64", "deb13-6.12-amd64") {
		g, dump := c.g, c.dump
		if !g.ExpectModules() {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			want := g.KallsymsText(t)
			code, stderr, diff := runCLIMatch(want, nil, "all", dump, "--layouts", "infer")
			require.Equal(t, exitOK, code, stderr)
			assert.Empty(t, diff, "--layouts infer: output differs")

			// Save the dump's BTF and a table written from it.
			s, err := kdumpsyms.Open(kdumpsyms.Options{}, dump)
			require.NoError(t, err)
			src, how, err := s.Layouts()
			require.NoError(t, err)
			assert.Contains(t, how, "__start_BTF")
			b := src.(*btflayout.BTF)
			kmem, err := s.Kernel()
			require.NoError(t, err)
			raw := make([]byte, b.Size())
			addr, _ := s.Chain().LookupName("__start_BTF")
			_, err = kmem.ReadAt(raw, addr.Addr)
			require.NoError(t, err)
			inf, err := func() (*btflayout.Inferred, error) {
				s2, err := kdumpsyms.Open(kdumpsyms.Options{Layouts: kdumpsyms.LayoutsInfer}, dump)
				if err != nil {
					return nil, err
				}
				defer s2.Close()
				src, _, err := s2.Layouts()
				if err != nil {
					return nil, err
				}
				return src.(*btflayout.Inferred), nil
			}()
			require.NoError(t, err)
			s.Close()
			dir := t.TempDir()
			btfFile := filepath.Join(dir, "vmlinux.btf")
			require.NoError(t, os.WriteFile(btfFile, raw, 0o644))
			tf, err := os.Create(filepath.Join(dir, "layout.txt"))
			require.NoError(t, err)
			require.NoError(t, btflayout.WriteTable(tf, b, inf.Want()))
			require.NoError(t, tf.Close())

			code, stderr, diff = runCLIMatch(want, nil, "all", dump, "--btf", btfFile)
			require.Equal(t, exitOK, code, stderr)
			assert.Empty(t, diff, "--btf: output differs")
			// info shows the evidence that the given BTF fits (issue 28.2).
			code, infoOut, stderr := runCLI("info", dump, "--btf", btfFile)
			require.Equal(t, exitOK, code, stderr)
			assert.Contains(t, infoOut, "given: BTF from "+btfFile)
			assert.Contains(t, infoOut, "(checked against the ")
			// A table has no BPF or ftrace structs: compare the vmlinux and
			// module lines.
			wantMods := truthLines(t, g, testutil.SymVmlinux, testutil.SymModule)
			code, stderr, diff = runCLIMatch(wantMods, nil, "all", dump, "--layout", tf.Name(), "--finders", "kallsyms,modules")
			require.Equal(t, exitOK, code, stderr)
			assert.Empty(t, diff, "--layout: output differs")

			// modules: the same columns, the taint flags shown as unknown.
			code, mods, stderr := runCLI("modules", dump, "--layouts", "infer")
			require.Equal(t, exitOK, code, stderr)
			truth, err := os.ReadFile(filepath.Join(g.Dir, "modules"))
			require.NoError(t, err)
			tl := strings.Split(strings.TrimSpace(string(truth)), "\n")
			ml := strings.Split(strings.TrimSpace(mods), "\n")
			require.Len(t, ml, len(tl))
			for i := range tl {
				want := strings.Fields(tl[i])[:6]
				got := strings.Fields(ml[i])
				// Inference finds refcnt and source_list only from modules
				// that have users (deb14-7.2-riscv64 loads three with
				// none): unknown is "?", never a wrong value.
				for _, j := range []int{2, 3} {
					if j < len(got) && got[j] == "?" {
						want[j] = "?"
					}
				}
				assert.Equal(t, strings.Join(want, " ")+" (?)", ml[i])
			}

			code, info, stderr := runCLI("info", dump, "--layouts", "infer")
			require.Equal(t, exitOK, code, stderr)
			assert.Contains(t, info, "layouts: inferred from the dump (forced)")
			assert.Contains(t, info, "module.kallsyms = ")
			code, _, stderr = runCLI("all", dump, "--layouts", "bogus")
			assert.Equal(t, exitUsage, code, stderr)
		})
	}
}

// TestLayoutsMissing: where the module walk has no layouts, the error asks
// for --btf or --layout.
func TestLayoutsMissing(t *testing.T) {
	ran := false
	for _, c := range corpusDumps(t) {
		g, dump := c.g, c.dump
		if g.ExpectModules() {
			continue
		}
		code, _, stderr := runCLI("modules", dump, "--layouts", "btf")
		if code == exitOK {
			continue // this dump has what the scans need
		}
		ran = true
		assert.Equal(t, exitError, code)
		// The remedy the user reads on stderr: the CLI's contract, as text.
		assert.Contains(t, stderr, "--btf FILE", g.Name)
		assert.Contains(t, stderr, "--layout FILE", g.Name)
	}
	if !ran {
		t.Skip("every corpus dump has BTF in reach")
	}
}
