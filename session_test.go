package kdumpsyms_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appendKallsymsLine appends a symbol's line as /proc/kallsyms prints it.
// digits is the address width: 16, or 8 for a 32-bit kernel. (Not
// fmt.Sprintf: the corpus tests format every symbol of every dump.)
func appendKallsymsLine(b []byte, s symfinder.Symbol, digits int) []byte {
	var hex [16]byte
	h := strconv.AppendUint(hex[:0], s.Addr, 16)
	for range digits - len(h) {
		b = append(b, '0')
	}
	b = append(append(b, h...), ' ', byte(s.Kind), ' ')
	b = append(b, s.Name...)
	if s.Module != "" {
		b = append(append(append(b, "\t["...), s.Module...), ']')
	}
	return append(b, '\n')
}

// lines splits text into its lines.
func lines(text []byte) []string {
	return strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
}

// TestSessionCorpus checks the whole pipeline on every corpus dump: the
// session's chain (kallsyms, modules, ftrace, bpf, kprobes) prints the
// guest's whole /proc/kallsyms, line for line, expanded from every dump
// format and lazily from the guest's one dump (the lazy decoder reads the
// kallsyms tables through the same kernel memory whatever the container,
// which the expanded runs check in every format).
func TestSessionCorpus(t *testing.T) {
	// The guests whose every dump is printed; the others' only when
	// thorough. deb13-6.12-riscv64's second dump, qemu.kdump-zlib, is the
	// costliest of the corpus (a million module symbols) and adds no kind
	// of container: a flattened kdump of 4 KiB pages with a 64-bit
	// little-endian header, as amd64's and arm64's are, whose VMCOREINFO is
	// found by scanning memory, as armhf's, ppc64el's and s390x's is; and
	// vmcore's TestCorpusOpen and TestCorpusSamePages still read it. Of the
	// kdump captures, the 6.12 one: makedumpfile's files of a real
	// /proc/vmcore, and the copy of it.
	everyFormat := map[string]bool{}
	for _, g := range testutil.Sample(t, "deb11-5.10-amd64", "deb11-5.10-i386", "deb12-6.1-amd64", "deb12-6.1-arm64",
		"deb13-6.12-amd64", "deb13-6.12-arm64", "deb13-6.12-armhf", "deb13-6.12-ppc64el", "deb13-6.12-s390x",
		"deb13-6.12-kdump-amd64") {
		everyFormat[g.Name] = true
	}
	for _, g := range testutil.Corpus(t) {
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			// vmlinux, modules, and the ftrace, BPF and kprobes
			// pseudo-modules the session's chain covers after them.
			want := g.KallsymsText(t)
			formats := g.AvailableDumps()
			if len(formats) == 0 {
				t.Skipf("no dumps of %s in the cache: run testdata/vmcores/generate", g.Name)
			}
			if !everyFormat[g.Name] {
				formats = formats[:1] // the one dump, printed below
			}
			digits := 2 * g.PtrSize()
			check := func(t *testing.T, s *kdumpsyms.Session) {
				got := make([]byte, 0, len(want))
				for sym, err := range s.Chain().All() {
					if err != nil {
						t.Fatal(err)
					}
					got = appendKallsymsLine(got, sym, digits)
				}
				if !bytes.Equal(want, got) {
					assertSameLines(t, lines(want), lines(got))
				}
			}
			for _, lazy := range []bool{false, true} {
				s, f := oneDumpSession(t, g, lazy)
				t.Run(fmt.Sprintf("%s/lazy=%v", f, lazy), func(t *testing.T) { check(t, s) })
			}
			for _, f := range formats {
				one, _ := g.OneDump()
				if f == one {
					continue // above
				}
				t.Run(fmt.Sprintf("%s/lazy=false", f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
					require.NoError(t, err)
					defer s.Close()
					check(t, s)
				})
			}
		})
	}
}

// assertSameLines compares line lists and reports the first differences
// instead of two huge blobs.
func assertSameLines(t *testing.T, want, got []string) {
	t.Helper()
	diffs := 0
	for i := 0; i < max(len(want), len(got)) && diffs < 10; i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Errorf("line %d:\n want %q\n  got %q", i+1, w, g)
			diffs++
		}
	}
	assert.Equal(t, len(want), len(got), "line count")
}

// TestOutsideModuleAreaLoadsNothing: an address where no module symbol
// can be (x86_64: outside the module area; arm64, riscv64, ppc64: user
// space and the linear map) is "not found" by the module and
// pseudo-module finders without their loading the module list or the
// BTF; an address of a module's text still loads them and is found.
func TestOutsideModuleAreaLoadsNothing(t *testing.T) {
	probes := map[string][]uint64{
		// a vmalloc'ed stack, an errno in a register, the direct map, a user stack
		"deb13-6.12-amd64": {0xffffc90000123456, 0xffffffffffffffda, 0xffff888000001000, 0x7ffd6dab6a68},
		// user space; the linear map of a 52-bit and of a 48-bit kernel
		"deb13-6.12-arm64": {0x0000ffffa1b2c3d0, 0xfff0000012345678, 0xffff000012345678},
		"deb12-6.1-arm64":  {0x0000ffffa1b2c3d0, 0xffff000012345678, 0xffff7fffffffeff0},
		// user space; the linear map (past ppc64's kernel image, which
		// lies in it)
		"deb13-6.12-riscv64": {0x0000003fffffe000, 0x00007fffd2a3b4c0, 0xff60000001234560, 0xff6000001fffeff0},
		"deb13-6.12-ppc64el": {0x00007fffd2a3b4c0, 0x0000000010000000, 0xc000000008001230, 0xc000000031fffff0},
	}
	for _, g := range testutil.Sample(t, slices.Sorted(maps.Keys(probes))...) {
		t.Run(g.Name, func(t *testing.T) {
			f, ok := g.OneDump()
			if !ok {
				t.Skip("no dump")
			}
			s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, g.RequireDump(t, f)...)
			require.NoError(t, err)
			defer s.Close()
			phases := func() map[string]bool {
				m := map[string]bool{}
				for _, p := range s.Stats() {
					m[p.Name] = true
				}
				return m
			}
			for _, a := range probes[g.Name] {
				_, err := s.Chain().Lookup(a)
				require.ErrorIs(t, err, symfinder.ErrNotFound, "%#x", a)
			}
			p := phases()
			assert.False(t, p["modules"], "module list read for addresses outside the module area")
			assert.False(t, p["btf"], "BTF read for addresses outside the module area")
			// A module's global function (the answer may be an alias at
			// its address: riscv64's local labels share them).
			var mod testutil.KallsymsEntry
			for _, e := range g.Kallsyms(t) {
				if e.Kind == testutil.SymModule && e.Type == 'T' {
					mod = e
					break
				}
			}
			require.NotZero(t, mod.Addr, "a module function in /proc/kallsyms")
			sym, err := s.Chain().Lookup(mod.Addr)
			require.NoError(t, err, "%s at %#x", mod.Name, mod.Addr)
			assert.Equal(t, mod.Addr, sym.Addr, "%s", mod.Name)
			assert.Equal(t, mod.Module, sym.Module, "%s", mod.Name)
			assert.True(t, phases()["modules"])
		})
	}
}
