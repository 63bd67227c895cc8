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

// TestIssue28ForeignPart: a part of another dump (here part 2 with
// another node name in its header, as a second run of makedumpfile on
// another machine would write it) is not taken for a part of this one:
// discovery names it and why, and naming it with --part is refused.
func TestIssue28ForeignPart(t *testing.T) {
	testutil.SkipShort(t, "the corpus' split set is deb11-5.10-amd64's, a guest -short leaves out")
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb11-5.10-amd64")
	p := g.RequireDump(t, testutil.DumpSplit)
	dir := t.TempDir()
	one, two := filepath.Join(dir, "vmcore.1"), filepath.Join(dir, "vmcore.2")
	copyTo(t, p[0], one)
	copyTo(t, p[1], two)
	// struct disk_dump_header: signature[8], header_version, then
	// utsname: sysname[65], nodename[65] at offset 77.
	f, err := os.OpenFile(two, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("other\x00"), 77)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	code, _, stderr := runCLI("info", one)
	assert.Equal(t, exitPartial, code, stderr)
	lines := stderrLines(stderr)
	require.GreaterOrEqual(t, len(lines), 2, stderr)
	assert.Equal(t, "kdump-syms: "+two+` beside it is a split part of another dump (against vmcore.1: node "other" and "(none)"): not read`, lines[0])
	assert.Contains(t, lines[1], "split dump: "+one+" is part 1")

	code, _, stderr = runCLI("info", one, "--part", two)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "file 2 of 2 is a part of another dump")
	assert.Len(t, stderrLines(stderr), 1, stderr)
}
