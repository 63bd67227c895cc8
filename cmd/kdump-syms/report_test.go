package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/corrupttest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReportOnce: one root cause that stopped four finders, seen once per
// finder and again through a lookup's joined error, prints as two lines;
// -v adds the chains.
func TestReportOnce(t *testing.T) {
	root := &memory.FaultError{Addr: 0xffffffff81000000, Op: "read", Err: memory.ErrNotSaved}
	kall := fmt.Errorf("kallsyms: token_table at %#x: %w", root.Addr, root)
	var errs []error
	errs = append(errs, &symfinder.FinderError{Finder: "kallsyms", Err: kall})
	for _, f := range []string{"modules", "ftrace", "bpf", "kprobes"} {
		errs = append(errs, &symfinder.FinderError{Finder: f, Err: &kdumpsyms.NeedsError{Source: f, Needs: "kallsyms", Err: kall}})
	}
	lookup := errors.Join(append([]error{fmt.Errorf("symfinder: address 0x1: %w", symfinder.ErrNotFound)}, errs...)...)
	for _, verbose := range []bool{false, true} {
		r := report{verbose: verbose, finders: []string{"kallsyms", "modules", "ftrace", "bpf", "kprobes"}}
		for _, e := range errs {
			r.add(e)
		}
		r.add(lookup)
		r.add(lookup)
		r.miss("address 0x1")
		var b strings.Builder
		r.print(&b)
		lines := stderrLines(b.String())
		require.GreaterOrEqual(t, len(lines), 2, b.String())
		assert.Equal(t, "kdump-syms: kallsyms: token_table at 0xffffffff81000000: "+root.Error(), lines[0])
		assert.Equal(t, "kdump-syms: not run because of it: modules, ftrace, bpf, kprobes (need kallsyms)", lines[1])
		if !verbose {
			assert.Len(t, lines, 2, b.String())
		} else {
			assert.Len(t, lines, 2+5, b.String()) // one chain per finder
			assert.True(t, strings.HasPrefix(lines[2], "  chain: symfinder: kallsyms: "), lines[2])
		}
	}
	// A miss a working finder leaves is named.
	r := report{finders: []string{"kallsyms", "modules"}}
	r.add(&symfinder.FinderError{Finder: "modules", Err: &kdumpsyms.NeedsError{Source: "modules", Needs: "struct layouts", Err: errors.New("no BTF")}})
	r.miss("address 0x1")
	var b strings.Builder
	r.print(&b)
	assert.Equal(t, []string{
		"kdump-syms: struct layouts: no BTF",
		"kdump-syms: not run because of it: modules (needs struct layouts)",
		"kdump-syms: address 0x1: not found",
	}, stderrLines(b.String()))
}

// brokenKallsymsCopy copies an ELF dump and overwrites the first bytes of
// its kallsyms token table (found through the library) with 0xff.
func brokenKallsymsCopy(t *testing.T, src string) string {
	t.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, src)
	require.NoError(t, err)
	k, err := s.Kallsyms()
	require.NoError(t, err)
	s.Close()
	return corruptCopy(t, src, k.Layout.TokenTable.Addr, 256)
}

func corruptCopy(t *testing.T, src string, va uint64, n int) string {
	return corrupttest.Copy(t, src, va, n)
}

// brokenGuests are the guests whose ELF dumps TestBrokenKallsyms and
// TestBrokenKallsymsTables damage (every guest with testutil.Thorough):
// the kallsyms tables of a 5.10 kernel (32-bit i386) and of 6.12 kernels,
// little- and big-endian.
var brokenGuests = []string{"deb11-5.10-i386", "deb13-6.12-amd64", "deb13-6.12-s390x"}

// TestBrokenKallsyms: on corpus guests' ELF dumps with their kallsyms
// token table overwritten, every command prints at most two lines on
// stderr, the first naming kallsyms and an address, the second the finders
// it stopped; the status is 1 where nothing useful came out, 3 for info.
func TestBrokenKallsyms(t *testing.T) {
	t.Parallel()
	n := 0
	for _, g := range testutil.Sample(t, brokenGuests...) {
		d, ok := g.Dump(testutil.DumpQEMUELF)
		if !ok {
			continue
		}
		p := d.Paths
		n++
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			b := brokenKallsymsCopy(t, p[0])
			// Corrupt tables fail an extract; tables a scan cannot find
			// leave an extract without symbols.
			extractCode := exitPartial
			if s, err := kdumpsyms.Open(kdumpsyms.Options{}, b); assert.NoError(t, err) {
				_, kerr := s.Kallsyms()
				require.Error(t, kerr)
				if errors.Is(kerr, memory.ErrCorrupt) {
					extractCode = exitError
				}
				s.Close()
			}
			for _, tc := range []struct {
				args []string
				code int
			}{
				{[]string{"all", b}, exitError},
				{[]string{"addr", b, "0xffffffff81000000", "0xffffffff81000010"}, exitError},
				{[]string{"name", b, "schedule", "printk"}, exitError},
				{[]string{"name", b, "--glob", "sched*"}, exitError},
				{[]string{"modules", b}, exitError},
				{[]string{"info", b}, exitPartial},
				{[]string{"extract", "-o", filepath.Join(t.TempDir(), "x"), b}, extractCode},
			} {
				code, _, stderr := runCLI(tc.args...)
				assert.Equal(t, tc.code, code, "%s: %s", tc.args[0], stderr)
				// The report's lines are what the user reads: the CLI's
				// contract, checked as text (the library's errors are typed).
				var lines []string
				for _, l := range stderrLines(stderr) {
					if !strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "kdump-syms: extract: kept") && !strings.HasPrefix(l, "kdump-syms: extract: wrote") {
						lines = append(lines, l) // not extract's page table
					}
				}
				require.NotEmpty(t, lines, tc.args[0])
				assert.LessOrEqual(t, len(lines), 2, "%s: %s", tc.args[0], stderr)
				assert.Regexp(t, `^kdump-syms: (extract: .*: )?kallsyms: `, lines[0])
				assert.NotContains(t, lines[0], "kallsyms: kallsyms: ")
				assert.Regexp(t, ` (at |\[)0x[0-9a-f]+`, lines[0], "names where") // an address or a range
				if len(lines) == 2 {
					assert.True(t, strings.HasPrefix(lines[1], "kdump-syms: not run because of it: modules"), lines[1])
				}
			}
		})
	}
	if n == 0 {
		t.Skip("no corpus ELF dumps")
	}
}

// TestBrokenKallsymsTables: whichever kallsyms table is damaged (so that
// several candidate layouts are tried and fail), "all" says so in one line
// and names the stopped finders in another; -v lists the candidates. On
// the brokenGuests.
func TestBrokenKallsymsTables(t *testing.T) {
	t.Parallel()
	for _, g := range testutil.Sample(t, brokenGuests...) {
		d, ok := g.Dump(testutil.DumpQEMUELF)
		if !ok {
			continue
		}
		p := d.Paths
		s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, p[0])
		require.NoError(t, err)
		k, err := s.Kallsyms()
		require.NoError(t, err)
		l := k.Layout
		s.Close()
		for name, r := range map[string]kallsyms.Region{"markers": l.Markers, "token_index": l.TokenIndex, "num_syms": l.NumSymsTable, "addresses": l.Addresses} {
			if r.Addr == 0 {
				continue
			}
			t.Run(g.Name+"/"+name, func(t *testing.T) {
				t.Parallel()
				b := corruptCopy(t, p[0], r.Addr, 16)
				code, stdout, stderr := runCLI("all", b)
				assert.Equal(t, exitError, code)
				assert.Empty(t, stdout)
				lines := stderrLines(stderr)
				require.Len(t, lines, 2, stderr)
				assert.True(t, strings.HasPrefix(lines[0], "kdump-syms: kallsyms: "), lines[0])
				assert.Regexp(t, `0x[0-9a-f]+`, lines[0])
				_, _, verbose := runCLI("all", "-v", b)
				assert.Greater(t, len(stderrLines(verbose)), 2)
			})
		}
	}
}

// TestReportOnePage: a list walked both ways that breaks twice for want of
// one page of physical memory (makedumpfile of Debian's 7.3.4 left out the
// page of two struct bpf_ksym) is one cause, one line; two pages, or two
// sources, are two.
func TestReportOnePage(t *testing.T) {
	broken := func(source string, virt, phys uint64) error {
		fault := &memory.FaultError{Addr: virt, Space: "kernel virtual", Op: "read",
			Err: fmt.Errorf("read at physical %#x: %w", phys, &memory.FaultError{Addr: phys, Space: "physical", Err: memory.ErrNotSaved})}
		return &symfinder.FinderError{Finder: source, Err: fmt.Errorf("list broken at %#x: %w", virt, fault)}
	}
	count := func(errs ...error) int {
		r := report{}
		for _, e := range errs {
			r.add(e)
		}
		var b strings.Builder
		r.print(&b)
		return len(stderrLines(b.String()))
	}
	assert.Equal(t, 1, count(broken("bpf", 0xffff8dd0828dd128, 0x28dd128), broken("bpf", 0xffff8dd0828ddb40, 0x28ddb40)))
	assert.Equal(t, 2, count(broken("bpf", 0xffff8dd0828dd128, 0x28dd128), broken("bpf", 0xffff8dd0828de140, 0x28de140)), "two pages")
	assert.Equal(t, 2, count(broken("bpf", 0xffff8dd0828dd128, 0x28dd128), broken("ftrace", 0xffff8dd0828ddb40, 0x28ddb40)), "two sources")
}
