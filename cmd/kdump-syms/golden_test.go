package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// goldenVerbs are the outputs pinned by golden files (issue 29: every
// output of every verb unchanged by a refactor). all is pinned by the
// guests' own /proc/kallsyms (TestAllCorpus), dmesg by their dmesg.
var goldenVerbs = []struct {
	name string
	args []string
}{
	{"info", []string{"info"}},
	{"info.json", []string{"info", "--format", "json"}},
	{"modules", []string{"modules"}},
	{"modules.json", []string{"modules", "--format", "json"}},
	{"panic", []string{"panic"}},
	{"panic.json", []string{"panic", "--format", "json"}},
}

// goldenNoise are the parts of an output that depend on where the test
// runs (the decompressed extract's path) or on how many reads earlier
// stages made (the translation counters), not on what was decoded.
var goldenNoise = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?m)^(  translations: ).*$`), "${1}…"},
	{regexp.MustCompile(`"translations: [^"]*"`), `"translations: …"`},
}

// TestGolden runs each verb on each guest's committed QEMU ELF extract (or
// its first extract) and compares stdout and stderr with
// testdata/golden/GUEST/VERB; go test -run TestGolden -update rewrites
// them.
func TestGolden(t *testing.T) {
	testutil.SkipShort(t, "every verb on every guest; the verbs' own tests cover their paths")
	for _, g := range testutil.Corpus(t) {
		var paths []string
		for _, f := range append([]testutil.DumpFormat{testutil.DumpQEMUELF}, g.Formats()...) {
			if p, ok := g.ExtractPaths(f); ok {
				paths = p
				break
			}
		}
		if paths == nil {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			for _, v := range goldenVerbs {
				code, stdout, stderr := runCLI(append(append([]string{}, v.args...), paths...)...)
				got := "exit " + strconv.Itoa(code) + "\n--- stderr\n" + stderr + "--- stdout\n" + stdout
				got = strings.ReplaceAll(got, paths[0], "DUMP")
				for _, n := range goldenNoise {
					got = n.re.ReplaceAllString(got, n.with)
				}
				file := filepath.Join("testdata", "golden", g.Name, v.name)
				if *update {
					require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
					require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
					continue
				}
				want, err := os.ReadFile(file)
				if os.IsNotExist(err) {
					t.Fatalf("%s: no golden file: go test -run TestGolden -update", file)
				}
				require.NoError(t, err)
				if string(want) != got {
					assertSameText(t, string(want), got)
					t.Errorf("%s differs (go test -run TestGolden -update rewrites it after checking the change)", file)
				}
			}
		})
	}
}
