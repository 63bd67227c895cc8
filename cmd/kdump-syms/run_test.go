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

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	return runCLIStdin(strings.NewReader(""), args...)
}

// runCLIStdin is runCLI with stdin as the command's standard input.
func runCLIStdin(stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, stdin, &o, &e)
	return code, o.String(), e.String()
}

func TestUsage(t *testing.T) {
	code, _, stderr := runCLI()
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "Usage:")
	code, stdout, _ := runCLI("help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "kdump-syms all")
	code, _, stderr = runCLI("frobnicate")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unknown command "frobnicate"`)
	for _, cmd := range []string{"all", "addr", "name", "info", "modules", "dmesg", "vmcoreinfo"} {
		code, stdout, _ = runCLI(cmd, "--help")
		assert.Equal(t, exitOK, code, cmd)
		assert.Contains(t, stdout, "Usage: kdump-syms "+cmd, cmd)
		code, _, _ = runCLI(cmd)
		assert.Equal(t, exitUsage, code, cmd)
		// A bad flag: one line naming it and where the flags are
		// listed, not the usage above it.
		code, _, stderr = runCLI(cmd, "--no-such-flag", "x")
		assert.Equal(t, exitUsage, code, cmd)
		assert.Equal(t, fmt.Sprintf("kdump-syms: %s: flag provided but not defined: -no-such-flag (kdump-syms %s --help lists its flags)\n", cmd, cmd), stderr)
	}
	code, _, stderr = runCLI("all", "--finder", "kallsyms", "x")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "kdump-syms: all: flag provided but not defined: -finder; did you mean --finders? (kdump-syms all --help lists its flags)\n", stderr)
	code, _, stderr = runCLI("all", "--raw", "0,0x1000", "x")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "range 0 at 0x0: only the last range")
	code, _, _ = runCLI("name", "x", "--glob", "--regexp", "a")
	assert.Equal(t, exitUsage, code)
}

func TestOpenErrors(t *testing.T) {
	code, _, stderr := runCLI("all", filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, exitError, code)
	// stderr is read by people: the CLI's contract, checked as text.
	assert.Contains(t, stderr, "kdump-syms: ")
	junk := filepath.Join(t.TempDir(), "junk")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("junk"), 1000), 0o644))
	code, _, stderr = runCLI("info", junk)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "unrecognized dump format")
}

// TestAllCorpus: `kdump-syms all` prints the guest's /proc/kallsyms byte for
// byte: vmlinux, modules, ftrace, BPF and kprobes lines, in the kernel's order.
func TestAllCorpus(t *testing.T) {
	t.Parallel()
	for _, c := range corpusDumps(t) {
		g, dump := c.g, c.dump
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			// Every guest, with or without KALLSYMS_ALL: without it the
			// ftrace, BPF and kprobes list heads are found through code.
			code, stderr, diff := runCLIMatch(g.KallsymsText(t), nil, "all", dump)
			if code != exitOK {
				t.Fatalf("all: status %d: %s", code, stderr)
			}
			assert.Empty(t, stderr, "all: status 0 with a message")
			if diff != "" {
				t.Errorf("all: not /proc/kallsyms: %s", diff)
			}

			code, stdout, stderr := runCLI("modules", dump)
			require.Equal(t, exitOK, code, stderr)
			assert.Empty(t, stderr, "modules: status 0 with a message")
			truth, err := os.ReadFile(filepath.Join(g.Dir, "modules"))
			require.NoError(t, err)
			if !g.ExpectModules() {
				// Layouts found by scan or inferred: name, size, use
				// count, users, state and address as the kernel printed
				// them; the taint flags inference cannot know are "(?)".
				truth = modulesWithoutFlags(truth)
				stdout = string(modulesWithoutFlags([]byte(stdout)))
			}
			assert.Equal(t, string(truth), stdout)
		})
	}
}

// modulesWithoutFlags drops the taint-flag column, "(...)" at the end of
// a /proc/modules line.
func modulesWithoutFlags(b []byte) []byte {
	var out []byte
	for line := range bytes.Lines(b) {
		l := strings.TrimSuffix(string(line), "\n")
		if i := strings.LastIndex(l, " ("); i >= 0 && strings.HasSuffix(l, ")") {
			l = l[:i]
		}
		out = append(out, l+"\n"...)
	}
	return out
}

// TestAddrCorpus symbolizes an oops built from ground-truth addresses plus
// offsets, and the PC of every CPU in the dump's PRSTATUS notes.
func TestAddrCorpus(t *testing.T) {
	t.Parallel()
	for _, c := range corpusDumps(t) {
		g, dump := c.g, c.dump
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			truth := g.Kallsyms(t)
			var oops, want strings.Builder
			picked := 0
			digits := 2 * g.PtrSize() // as the kernel prints addresses: 8 digits on 32-bit
			// The kernel names no vmlinux address below _stext (is_ksym_addr):
			// riscv64's first line, _start, lies in the image head below it.
			var stext uint64
			for _, e := range truth {
				if e.Kind == testutil.SymVmlinux && e.Name == "_stext" {
					stext = e.Addr
				}
			}
			for i, e := range truth {
				if picked == 40 || e.Kind != testutil.SymVmlinux && e.Kind != testutil.SymModule {
					continue
				}
				if e.Kind == testutil.SymVmlinux && e.Addr < stext {
					continue
				}
				if e.Type != 't' && e.Type != 'T' || i+1 >= len(truth) || truth[i+1].Addr <= e.Addr+8 || i%997 != 0 {
					continue
				}
				// The first symbol at an address is what the kernel reports.
				if i > 0 && truth[i-1].Addr == e.Addr {
					continue
				}
				picked++
				a := e.Addr + 5
				suffix := ""
				if e.Module != "" {
					suffix = " [" + e.Module + "]"
				}
				fmt.Fprintf(&oops, " [<%0*x>] ? garbage\n", digits, a)
				fmt.Fprintf(&want, " [<%0*x>] %s+0x5/", digits, a, e.Name)
				want.WriteString("SIZE" + suffix + " ? garbage\n")
			}
			require.Greater(t, picked, 10)
			code, stdout, stderr := runCLIStdin(strings.NewReader(oops.String()), "addr", dump, "-")
			require.Equal(t, exitOK, code, stderr)
			assert.Empty(t, stderr, "addr: status 0 with a message")
			// Sizes are checked by the kallsyms and modsyms tests; blank them.
			got := stdout
			for _, l := range strings.Split(got, "\n") {
				if i := strings.Index(l, "+0x5/"); i >= 0 {
					j := strings.IndexAny(l[i+5:], " ")
					got = strings.Replace(got, l, l[:i+5]+"SIZE"+l[i+5+j:], 1)
				}
			}
			assert.Equal(t, want.String(), got)

			// The PC of every CPU in the dump's PRSTATUS notes resolves to
			// the symbol the ground truth says contains it.
			d, err := vmcore.Open(dump)
			require.NoError(t, err)
			cpus := d.CPUs()
			require.NoError(t, d.Close())
			require.NotEmpty(t, cpus)
			// One addr command for every CPU's PC.
			type pcWant struct {
				pc   uint64
				want string
			}
			var pcs []pcWant
			args := []string{"addr", dump}
			for _, cpu := range cpus {
				if g.ArchName() == "ppc64le" && len(cpu.Regs) > 33 && cpu.Regs[33]&ppcMSRIR == 0 {
					// Real mode: a pseries guest reports its panic
					// to the hypervisor (RTAS ibm,os-term), and QEMU
					// stops it there, in the RTAS blob.
					t.Logf("cpu in real mode at %#x (msr %#x): no kernel address", cpu.PC, cpu.Regs[33])
					continue
				}
				if g.Arch() == "armhf" && cpu.PC >= 0xffff0000 {
					// The exception vectors' page, a copy of
					// __vectors_start that kallsyms names only at its link
					// address (QEMU stopped the CPU entering the IRQ
					// vector): no symbol holds it.
					continue
				}
				var best *testutil.KallsymsEntry
				for i := range truth {
					e := &truth[i]
					if e.Kind == testutil.SymVmlinux && e.Addr <= cpu.PC && (best == nil || e.Addr > best.Addr) {
						best = e
					}
				}
				require.NotNil(t, best, "pc %#x", cpu.PC)
				pcs = append(pcs, pcWant{cpu.PC, fmt.Sprintf("%0*x %s+%#x/", digits, cpu.PC, best.Name, cpu.PC-best.Addr)})
				args = append(args, fmt.Sprintf("%#x", cpu.PC))
			}
			if len(pcs) > 0 {
				code, stdout, stderr = runCLI(args...)
				require.Equal(t, exitOK, code, stderr)
				for _, p := range pcs {
					assert.Contains(t, stdout, p.want, "pc %#x", p.pc)
				}
			}

			// The release, from VMCOREINFO: no symbols needed.
			code, stdout, stderr = runCLI("info", "--no-symbols", dump)
			require.Equal(t, exitOK, code, stderr)
			assert.Contains(t, stdout, "kernel release:        "+g.Uname(t))
		})
	}
}

// closedPipe fails every write with err (a pipe whose reader has gone
// fails with EPIPE).
type closedPipe struct {
	n   int
	err error
}

func (c *closedPipe) Write(p []byte) (int, error) {
	c.n++
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: c.err}
}

// TestBrokenPipe checks that output cut short by its reader (kdump-syms all
// ... | head) ends quietly with status 0, and that other write errors are
// still reported.
func TestBrokenPipe(t *testing.T) {
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths := g.RequireDump(t, testutil.DumpQEMUELF)
	var e bytes.Buffer
	w := &closedPipe{err: syscall.EPIPE}
	code := run([]string{"all", paths[0]}, nil, w, &e)
	assert.Equal(t, exitOK, code)
	assert.Empty(t, e.String())
	assert.NotZero(t, w.n)
	w.err = syscall.ENOSPC
	code = run([]string{"all", paths[0]}, nil, w, &e)
	assert.Equal(t, exitError, code)
	assert.Contains(t, e.String(), "no space left on device")
}

// TestWrappedCache checks that a second run on a wrapped dump is answered
// from the cache, and that --no-cache leaves the cache alone. What is
// checked is the cache, not the dump or its wrapper: the smallest
// committed extract (i386's, which TestExitStatus reads too),
// zstd-wrapped here, which decompresses in milliseconds (its .xz took
// 0.15 s a run), and info --no-symbols, which opens the dump and decodes
// nothing the cache does not change. vmcore's TestCache checks the cache
// with xz and that an entry holds the dump byte for byte; extract's
// TestCommittedExtractsWrapped and the examples open committed .xz files.
func TestWrappedCache(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb11-5.10-i386")
	src, ok := g.ExtractPaths(testutil.DumpQEMUELF)
	require.True(t, ok, "%s has no committed QEMU ELF extract", g.Name)
	paths := []string{zstdCopy(t, src[0])}
	dir := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "kdump-syms")
	os.RemoveAll(dir)
	code, _, stderr := runCLI("info", "--no-symbols", "--no-cache", paths[0])
	require.Equal(t, 0, code, stderr)
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "--no-cache made %s", dir)
	code, first, stderr := runCLI("info", "--no-symbols", paths[0])
	require.Equal(t, 0, code, stderr)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	// Issue 28.5: the copy of the evidence is announced once, when made.
	assert.Equal(t, []string{"kdump-syms: kept the decompressed dump as " + filepath.Join(dir, ents[0].Name()) +
		" for the next run (at most 4 GiB in all, least recently used removed first; --no-cache: keep none)"}, stderrLines(stderr))
	code, second, stderr := runCLI("info", "--no-symbols", paths[0])
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	require.Equal(t, first, second)
	ents2, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents2, 1)
}

// stderrLines splits stderr into its lines.
func stderrLines(stderr string) []string {
	if stderr == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
}

// zstdCopy writes src zstd-compressed (fastest level) into a temporary
// file named like it with ".zst" added, and returns its path.
func zstdCopy(t *testing.T, src string) string {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	p := filepath.Join(t.TempDir(), filepath.Base(src)+".zst")
	out, err := os.Create(p)
	require.NoError(t, err)
	zw, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = io.Copy(zw, in)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, out.Close())
	return p
}
