package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func copyTo(t *testing.T, src, dst string) {
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

// TestSplitCLI: a split part given alone with its sibling beside it reads
// the whole set and says so; alone, it says which part it is and exits 3.
func TestSplitCLI(t *testing.T) {
	testutil.SkipShort(t, "the corpus' split set is deb11-5.10-amd64's, a guest -short leaves out; vmcore's TestSplitAlone reads it, diskdump's TestSplit checks split sets")
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb11-5.10-amd64")
	p := g.RequireDump(t, testutil.DumpSplit)
	code, want, stderr := runCLI("all", p[0], "--part", p[1])
	require.Equal(t, exitOK, code, stderr)

	dir := t.TempDir()
	one, two := filepath.Join(dir, "vmcore.1"), filepath.Join(dir, "vmcore.2")
	copyTo(t, p[0], one)
	copyTo(t, p[1], two)
	code, got, stderr := runCLI("all", one)
	assert.Equal(t, exitOK, code, stderr)
	assert.True(t, want == got, "output differs from the set named with --part")
	assert.Equal(t, []string{"kdump-syms: " + one + " is one part of a split dump; reading the other parts beside it too: " + two}, stderrLines(stderr))

	alone := filepath.Join(t.TempDir(), "vmcore.2")
	copyTo(t, p[1], alone)
	code, _, stderr = runCLI("info", alone)
	assert.Equal(t, exitPartial, code)
	lines := stderrLines(stderr)
	require.NotEmpty(t, lines)
	assert.True(t, strings.HasPrefix(lines[0], "kdump-syms: split dump: "+alone+" is part 2 (pfns ["), lines[0])
}
