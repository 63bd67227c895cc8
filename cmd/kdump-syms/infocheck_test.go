package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// TestVMCOREINFOChecked: a dump whose ELF note was tampered with (another
// OSRELEASE and SYMBOL(_stext), same lengths) is read with the note the
// kernel kept in memory, which validates where the ELF copy does not, and
// info says so; `all` still prints /proc/kallsyms.
func TestVMCOREINFOChecked(t *testing.T) {
	testutil.SkipShort(t, "vmcore's TestInfoCheck checks which VMCOREINFO is used on synthetic cores, and every open of the short guest checks its note; this is a tampered copy of it")
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	src, ok := g.ExtractPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no committed QEMU ELF extract of " + g.Name)
	}
	img, err := os.ReadFile(src[0])
	require.NoError(t, err)
	info := g.VMCOREINFO(t)
	note := bytes.Index(img, info[:64])
	require.Greater(t, note, 0)
	require.Less(t, note, 1<<16, "the ELF note comes before memory in the file")
	stext := regexp.MustCompile(`SYMBOL\(_stext\)=([0-9a-f]+)`).FindSubmatchIndex(img[note:])
	require.NotNil(t, stext)
	bad := bytes.Clone(img)
	rel := note + len("OSRELEASE=")
	bad[rel] ^= 1             // "6.12..." → "7.12..."
	bad[note+stext[3]-5] ^= 1 // a digit of _stext's page
	dir := t.TempDir()
	tampered := filepath.Join(dir, "tampered.elf")
	require.NoError(t, os.WriteFile(tampered, bad, 0o644))

	code, stdout, stderr := runCLI("info", "--no-symbols", tampered)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^vmcoreinfo: +memory-scan at 0x1a2a000$`, stdout)
	assert.Regexp(t, `(?m)^vmcoreinfo check: .*differs from the note in memory: elf-note does not \(.*_stext.*\); the note in memory at 0x1a2a000 validates \(_stext matches kallsyms.*\); using the note in memory$`, stdout)
	code, stderr, diff := runCLIMatch(g.KallsymsText(t), nil, "all", tampered)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, diff, "all differs from /proc/kallsyms")

	// --vmcoreinfo overrides: the tampered text breaks a good dump, the
	// true text reads an image.
	badText := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(badText, bad[note:note+len(info)], 0o644))
	code, _, _ = runCLI("all", "--vmcoreinfo", badText, src[0])
	assert.NotEqual(t, exitOK, code)
	goodText := filepath.Join(dir, "good.txt")
	require.NoError(t, os.WriteFile(goodText, info, 0o644))
	im := sharedImages(t, src[0])
	code, stdout, stderr = runCLI("info", "--no-symbols", "--vmcoreinfo", goodText, im.LiME)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^vmcoreinfo: +option$`, stdout)
	code, _, stderr = runCLI("info", "--vmcoreinfo", filepath.Join(dir, "missing"), im.LiME)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "missing")
}
