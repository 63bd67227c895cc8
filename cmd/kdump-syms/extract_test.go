package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

func TestExtractUsage(t *testing.T) {
	code, stdout, _ := runCLI("extract", "--help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "Usage: kdump-syms extract")
	for _, args := range [][]string{
		{"extract"},
		{"extract", "vmcore"},                            // no -o
		{"extract", "-o", "x", "a", "b"},                 // two dumps
		{"extract", "-o", "x", "--format", "kdump", "a"}, // only elf
		{"extract", "-o", "x", "--keep", "q:1-2", "a"},
	} {
		code, _, _ := runCLI(args...)
		assert.Equal(t, exitUsage, code, "%q", args)
	}
}

func TestExtractCLI(t *testing.T) {
	dir := t.TempDir()
	ram := bytes.Repeat([]byte("kdump-syms"), 64<<10)
	core := (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote("OSRELEASE=6.1.0-test\nPAGESIZE=4096\n")},
		Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}},
	}).Bytes()
	in := filepath.Join(dir, "in.elf")
	require.NoError(t, os.WriteFile(in, core, 0o644))
	out := filepath.Join(dir, "out.elf")
	// Written, but without its symbol stages: a partial success.
	code, stdout, stderr := runCLI("extract", "-o", out, "--keep", "p:0x1000-0x3000", in)
	require.Equal(t, exitPartial, code, stderr)
	assert.Equal(t, out+"\n", stdout)
	// stderr is read by people: the CLI's contract, checked as text.
	assert.Contains(t, stderr, "kept 2 pages")
	assert.Contains(t, stderr, "keep")
	assert.Contains(t, stderr, "translation") // and why it failed
	st, err := os.Stat(out)
	require.NoError(t, err)
	assert.Less(t, st.Size(), int64(3*4096))

	// No overwrite without --force.
	code, _, stderr = runCLI("extract", "-o", out, in)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "exists")
	code, _, stderr = runCLI("extract", "-o", out, "--force", in)
	assert.Equal(t, exitPartial, code, stderr)

	// A broken input fails naming it, and leaves nothing behind.
	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, append([]byte("KDUMP   "), make([]byte, 100)...), 0o644))
	code, _, stderr = runCLI("extract", "-o", filepath.Join(dir, "junk.out"), junk)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, junk)
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		assert.False(t, strings.HasPrefix(n.Name(), "junk.out") || strings.Contains(n.Name(), ".tmp-"), n.Name())
	}
}

// TestExtractCorpus: "kdump-syms all" prints /proc/kallsyms on an extract
// as on its input (which TestAllCorpus checks), and dmesg and panic print
// the same on both.
//
// The extract package checks its writers on each architecture family;
// here the command is run on x86_64, on i386 and armhf (32-bit, without
// KALLSYMS_ALL: modules found by scanning) and on big-endian s390x.
func TestExtractCorpus(t *testing.T) {
	testutil.SkipShort(t, "extract's TestCorpusExtract extracts the short guest's dump and decodes the extract, TestExitStatus runs the command on it")
	t.Parallel()
	for _, c := range sampleDumps(t, "deb11-5.10-i386", "deb13-6.12-amd64", "deb13-6.12-armhf", "deb13-6.12-s390x") {
		g, dump := c.g, c.dump
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "x")
			code, _, stderr := runCLI("extract", "-o", out, dump)
			require.Equal(t, exitOK, code, stderr)
			t.Log(stderr)
			code, stderr, diff := runCLIMatch(g.KallsymsText(t), nil, "all", out)
			require.Equal(t, exitOK, code, stderr)
			if diff != "" {
				t.Errorf("all on the extract: not /proc/kallsyms: %s", diff)
			}
			code1, want, _ := runCLI("dmesg", dump)
			code2, got, _ := runCLI("dmesg", out)
			assert.Equal(t, code1, code2)
			assert.Equal(t, want, got, "dmesg differs on the extract")
			code1, want, _ = runCLI("panic", dump)
			code2, got, _ = runCLI("panic", out)
			assert.Equal(t, code1, code2)
			assert.Equal(t, want, got, "panic differs on the extract")
		})
	}
}
