package vmcore

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDigitStem(t *testing.T) {
	for name, want := range map[string][3]string{
		"vmcore.1":              {"vmcore.", "", "ok"},
		"dump-12.kdump":         {"dump-", ".kdump", "ok"},
		"mdf-d31-zlib-split.2":  {"mdf-d31-zlib-split.", "", "ok"},
		"vmcore":                {"", "", ""},
		"2026-12-01/vmcore.3.x": {"2026-12-01/vmcore.", ".x", "ok"},
	} {
		p, s, ok := digitStem(name)
		assert.Equal(t, want[2] == "ok", ok, name)
		if ok {
			assert.Equal(t, want[0], p, name)
			assert.Equal(t, want[1], s, name)
		}
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestSplitAlone: one part of a split set says which part it is, of how
// many at least; its siblings beside it under the same stem are found.
func TestSplitAlone(t *testing.T) {
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb11-5.10-amd64")
	p := g.RequireDump(t, testutil.DumpSplit)
	dir := t.TempDir()
	one, two := filepath.Join(dir, "vmcore.1"), filepath.Join(dir, "vmcore.2")
	copyFile(t, p[0], one)
	copyFile(t, p[1], two)
	assert.Equal(t, []string{two}, SplitSiblings(one))
	assert.Equal(t, []string{one}, SplitSiblings(two))

	d, err := Open(two)
	require.NoError(t, err)
	si := d.Split()
	require.NotNil(t, si)
	require.Len(t, si.Parts, 1)
	require.Len(t, si.Gaps, 1)
	assert.Equal(t, SplitGap{0, si.Parts[0].StartPFN}, si.Gaps[0])
	assert.Regexp(t, `^part 2 \(pfns \[0x[0-9a-f]+, 0x[0-9a-f]+\) of 0x[0-9a-f]+\) of a split dump of at least 2 parts`, si.Describe())
	require.NoError(t, d.Close())

	d, err = Open(one, two)
	require.NoError(t, err)
	assert.Empty(t, d.Split().Gaps)
	require.NoError(t, d.Close())

	// Not a split part, or no sibling: nothing found.
	alone := filepath.Join(t.TempDir(), "vmcore.1")
	copyFile(t, p[0], alone)
	assert.Empty(t, SplitSiblings(alone))
	elf := g.RequireDump(t, testutil.DumpQEMUELF)
	assert.Empty(t, SplitSiblings(elf[0]))
}
