package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExitStatus checks the one exit-status rule on every command: 0 when
// everything asked for was produced, 3 when output was produced but some
// part failed (and stderr says which), 1 when nothing useful could be, 2
// for usage errors.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	good := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64").RequireDump(t, testutil.DumpQEMUELF)[0]
	// A kernel without BTF read with --layouts btf: the vmlinux symbols
	// but no modules.
	noBTF := testutil.CorpusGuestNamed(t, "deb11-5.10-i386").RequireDump(t, testutil.DumpQEMUELF)[0]
	badModule := brokenModuleCopy(t, good, "xfs")
	broken := brokenKallsymsCopy(t, good)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("junk"), 1000), 0o644))
	var sym string
	var addr uint64
	for _, e := range testutil.CorpusGuestNamed(t, "deb13-6.12-amd64").Kallsyms(t) {
		if e.Type == 'T' && e.Kind == testutil.SymVmlinux {
			sym, addr = e.Name, e.Addr
			break
		}
	}
	a := fmt.Sprintf("%#x", addr)
	out := func() string { return filepath.Join(t.TempDir(), "x.elf") }
	for _, tc := range []struct {
		name string
		args []string
		code int
		line string // a regexp the first line of stderr matches, if set
		// also names the test that -short runs the command of a success
		// in too, requiring status 0 and (but for extract) nothing on
		// stderr: -short leaves the case to it.
		also string
	}{
		{"all/ok", []string{"all", good}, exitOK, "", "TestAllCorpus"},
		{"all/partial", []string{"all", "--layouts", "btf", noBTF}, exitPartial, "", ""},
		{"all/partial module", []string{"all", badModule}, exitPartial, "", ""},
		// The module finder turned off: its failures are not asked for.
		{"all/modules off", []string{"all", "--finders", "kallsyms", badModule}, exitOK, "", ""},
		{"all/vmlinux only", []string{"all", "--module", "vmlinux", badModule}, exitOK, "", ""},
		{"all/nothing", []string{"all", broken}, exitError, "", ""},
		{"all/unreadable", []string{"all", junk}, exitError, "", ""},
		{"all/usage", []string{"all"}, exitUsage, "", ""},
		{"addr/ok", []string{"addr", good, a}, exitOK, "", "TestAddrCorpus"},
		{"addr/partial", []string{"addr", good, a, "0xfffffffffffff000"}, exitPartial, "", ""},
		{"addr/nothing", []string{"addr", broken, a}, exitError, "", ""},
		{"addr/usage", []string{"addr", good, "z z"}, exitUsage, "", ""},
		{"name/ok", []string{"name", good, sym}, exitOK, "", "TestReverseAndModules"},
		{"name/partial", []string{"name", good, sym, "no_such_symbol_anywhere"}, exitPartial, "", ""},
		{"name/nothing", []string{"name", broken, sym}, exitError, "", ""},
		{"name/usage", []string{"name", good, "--glob", "--regexp", "x"}, exitUsage, "", ""},
		{"info/ok", []string{"info", good}, exitOK, "", ""},
		{"info/partial", []string{"info", broken}, exitPartial, "", ""},
		{"info/nothing", []string{"info", junk}, exitError, "", ""},
		{"info/usage", []string{"info"}, exitUsage, "", ""},
		{"info/directory", []string{"info", dir}, exitError, "", ""},
		{"modules/ok", []string{"modules", good}, exitOK, "", "TestAllCorpus"},
		{"modules/partial", []string{"modules", badModule}, exitPartial, `^kdump-syms: modules: modsyms: module ".*fs" \(struct module at 0x[0-9a-f]+\): name .* is not printable`, ""},
		{"modules/nothing no layouts", []string{"modules", "--layouts", "btf", noBTF}, exitError, "", ""},
		{"modules/nothing", []string{"modules", broken}, exitError, "", ""},
		{"modules/usage", []string{"modules", "--bogus", good}, exitUsage, "", ""},
		{"extract/ok", []string{"extract", "-o", out(), good}, exitOK, "", ""},
		{"extract/partial", []string{"extract", "--layouts", "btf", "-o", out(), noBTF}, exitPartial, "", ""},
		{"extract/corrupt module", []string{"extract", "-o", out(), badModule}, exitError, "", ""},
		{"extract/nothing", []string{"extract", "-o", out(), junk}, exitError, "", ""},
		{"extract/usage", []string{"extract", good}, exitUsage, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.also != "" {
				testutil.SkipShort(t, tc.also+" runs the command on the same dump and requires the same")
			}
			// Only the status and stderr are checked: the output (all of
			// /proc/kallsyms, for all/ok) is not kept.
			var e bytes.Buffer
			code := run(tc.args, strings.NewReader(""), io.Discard, &e)
			stderr := e.String()
			assert.Equal(t, tc.code, code, stderr)
			if tc.line != "" {
				assert.Regexp(t, tc.line, stderrLines(stderr)[0])
			}
			switch tc.code {
			case exitOK:
				if tc.args[0] != "extract" { // extract reports its pages on stderr
					assert.Empty(t, stderr)
				}
			default:
				// stderr says what failed, in lines of our own.
				require.NotEmpty(t, stderr)
				for _, l := range stderrLines(stderr) {
					if l != "" && l[0] != ' ' && l[:min(len(l), 6)] != "Usage:" && l != "Flags:" && l != "Example:" {
						assert.Regexp(t, `^kdump-syms: `, l)
					}
				}
			}
		})
	}
}

// TestFIFOCLI: a dump given as a FIFO is read whole from its writer, by
// every step of the command line (the split-sibling probe once opened it
// and waited for a writer that had already gone).
func TestFIFOCLI(t *testing.T) {
	t.Parallel()
	src := testutil.CorpusGuestNamed(t, "deb12-6.1-arm64").RequireDump(t, testutil.DumpQEMUELF)[0]
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	fifo := filepath.Join(t.TempDir(), "vmcore")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(fifo, raw, 0o600) }()
	code, stdout, stderr := runCLI("info", "--no-cache", fifo)
	require.NoError(t, <-done)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "kernel release:")
}

// brokenModuleCopy copies the ELF dump src with the first byte of module
// name's struct module name overwritten: that module cannot be read, the
// others can.
func brokenModuleCopy(t *testing.T, src, name string) string {
	t.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, src)
	require.NoError(t, err)
	defer s.Close()
	set, err := s.Modules()
	require.NoError(t, err)
	kmem, err := s.Kernel()
	require.NoError(t, err)
	for _, m := range set.Modules() {
		if m.Name != name {
			continue
		}
		buf := make([]byte, 256)
		require.NoError(t, memory.ReadFull(kmem, buf, m.Addr))
		i := bytes.Index(buf, append([]byte(name), 0))
		require.GreaterOrEqual(t, i, 0, "name %q in struct module at %#x", name, m.Addr)
		return corruptCopy(t, src, m.Addr+uint64(i), 1)
	}
	t.Fatalf("no module %s in %s", name, src)
	return ""
}
