package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOopsCorpus symbolizes a trace built from the ground truth in each
// frame form: symbolic frames stay as they are and get their exact address
// with --addresses; frames that already carry a symbol are never given a
// second one; bare return addresses at the very end of a function are
// blamed on it on x86 (%pB), on the next function elsewhere (%pS); and
// the "?" stays where it was.
//
// What the trace parser depends on is the pointer width and x86 or not:
// run on x86_64, i386, arm64 and 32-bit ARM.
func TestOopsCorpus(t *testing.T) {
	t.Parallel()
	for _, c := range sampleDumps(t, "deb11-5.10-i386", "deb13-6.12-amd64", "deb13-6.12-arm64", "deb13-6.12-armhf") {
		g, dump := c.g, c.dump
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			var vm []testutil.KallsymsEntry
			for _, e := range g.Kallsyms(t) {
				if e.Kind == testutil.SymVmlinux {
					vm = append(vm, e)
				}
			}
			slices.SortStableFunc(vm, func(a, b testutil.KallsymsEntry) int { return cmp.Compare(a.Addr, b.Addr) })
			// Addresses print as wide as the kernel's pointers (s390x's
			// kernel runs at low addresses, 16 digits all the same).
			digits := 2 * g.PtrSize()
			x86 := g.Arch() == "amd64" || g.Arch() == "i386"
			names := map[string]int{}
			for _, e := range vm {
				names[e.Name]++
			}
			var in, want, wantAddrs strings.Builder
			in.WriteString("Call Trace:\n <TASK>\n")
			want.WriteString("Call Trace:\n <TASK>\n")
			wantAddrs.WriteString("Call Trace:\n <TASK>\n")
			picked := 0
			for i := 1; i+1 < len(vm) && picked < 60; i += 211 {
				e, next := vm[i], vm[i+1]
				if e.Type != 't' && e.Type != 'T' || vm[i-1].Addr == e.Addr || next.Addr <= e.Addr+8 || names[e.Name] != 1 {
					continue
				}
				picked++
				size := next.Addr - e.Addr
				q := ""
				if picked%2 == 0 {
					q = "? "
				}
				sym := fmt.Sprintf("%s+0x5/%#x", e.Name, size)
				// Modern symbolic frame.
				fmt.Fprintf(&in, " %s%s\n", q, sym)
				fmt.Fprintf(&want, " %s%s\n", q, sym)
				fmt.Fprintf(&wantAddrs, " %s[<%0*x>] %s\n", q, digits, e.Addr+5, sym)
				// 3.x frame with its symbol: untouched.
				fmt.Fprintf(&in, " [<%0*x>] %s%s\n", digits, e.Addr+5, q, sym)
				fmt.Fprintf(&want, " [<%0*x>] %s%s\n", digits, e.Addr+5, q, sym)
				fmt.Fprintf(&wantAddrs, " [<%0*x>] %s%s\n", digits, e.Addr+5, q, sym)
				// A bare frame address at the function's end: x86 prints
				// return addresses with %pB (the call's own function),
				// other architectures with %pS (the next function's +0x0).
				end := fmt.Sprintf(" %s0x%0*x", q, digits, next.Addr)
				blamed := fmt.Sprintf("%s+%#x/%#x", e.Name, size, size)
				if !x86 {
					j := i + 2
					for j < len(vm) && vm[j].Addr == next.Addr {
						j++
					}
					if j == len(vm) {
						continue
					}
					blamed = fmt.Sprintf("%s+0x0/%#x", next.Name, vm[j].Addr-next.Addr)
				}
				fmt.Fprintf(&in, "%s\n", end)
				fmt.Fprintf(&want, "%s %s\n", end, blamed)
				fmt.Fprintf(&wantAddrs, "%s %s\n", end, blamed)
			}
			in.WriteString(" </TASK>\n")
			want.WriteString(" </TASK>\n")
			wantAddrs.WriteString(" </TASK>\n")
			require.Greater(t, picked, 20)
			for _, tc := range []struct {
				flags []string
				want  string
			}{{nil, want.String()}, {[]string{"--addresses"}, wantAddrs.String()}} {
				code, stdout, stderr := runCLIStdin(strings.NewReader(in.String()), append(append([]string{"addr"}, tc.flags...), dump, "-")...)
				require.Equal(t, exitOK, code, stderr)
				assertSameText(t, tc.want, stdout)
			}
		})
	}
}

func assertSameText(t *testing.T, want, got string) {
	t.Helper()
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	bad := 0
	for i := 0; i < max(len(w), len(g)) && bad < 8; i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			t.Errorf("line %d:\n want %q\n  got %q", i+1, a, b)
			bad++
		}
	}
}

// TestIssue28OopsFromAnotherBuild: the kernel's own console log, given to
// "addr VMCORE -" with its own dump, is flagged nowhere (no false alarm on
// any architecture); another build's log is flagged on its release line,
// its Kernel Offset line and its frames, with one summary line, exit 3.
func TestIssue28OopsFromAnotherBuild(t *testing.T) {
	testutil.SkipShort(t, "reads every guest's console log through addr -")
	t.Parallel()
	console := func(g *testutil.CorpusGuest) string {
		text, err := os.ReadFile(filepath.Join(g.Dir, "console.log"))
		if err != nil {
			return ""
		}
		return string(text)
	}
	checked := 0
	for _, c := range pickDumps(t, testutil.Corpus(t), elfFirst) {
		text := console(c.g)
		if text == "" {
			continue
		}
		checked++
		t.Run(c.g.Name, func(t *testing.T) {
			t.Parallel()
			_, stdout, stderr := runCLIStdin(strings.NewReader(text), "addr", c.dump, "-")
			assert.NotContains(t, stderr, "does not match")
			for line := range strings.Lines(stdout) {
				assert.NotContains(t, line, "[kdump-syms:")
			}
		})
	}
	if checked == 0 {
		t.Skip("no corpus guest has a console.log")
	}

	t.Run("6.12 log, 6.1 dump", func(t *testing.T) {
		g12 := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
		g61 := testutil.CorpusGuestNamed(t, "deb12-6.1-amd64")
		text := console(g12)
		f, ok := g61.OneDump()
		if text == "" || !ok {
			t.Skip("no console log of deb13-6.12-amd64 or dump of deb12-6.1-amd64")
		}
		paths, _ := g61.DumpPaths(f)
		code, stdout, stderr := runCLIStdin(strings.NewReader(text), "addr", paths[0], "-")
		assert.Equal(t, exitPartial, code, stderr)
		rel61 := strings.TrimSpace(g61.Uname(t))
		rel12 := strings.TrimSpace(g12.Uname(t))
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		require.Len(t, lines, 1, stderr)
		assert.Contains(t, lines[0], "the text does not match this dump: release "+rel12+", this dump "+rel61)
		assert.Contains(t, lines[0], "Kernel Offset")
		assert.Contains(t, lines[0], "symbolic frames disagree")
		assert.Contains(t, stdout, "[kdump-syms: this dump is "+rel61+"]")
	})

	t.Run("address and symbol disagree", func(t *testing.T) {
		g, dump := guestWithXFS(t)
		vw := truthSymbol(t, g, "", "vfs_write")
		text := fmt.Sprintf("Call Trace:\n <TASK>\n [<%016x>] vfs_write+0xe1/0x440\n vfs_write+0xe1/0x441\n nosuch_fn+0x1/0x2\n </TASK>\n", vw.Addr+0x2e1)
		code, stdout, stderr := runCLIStdin(strings.NewReader(text), "addr", dump, "-")
		assert.Equal(t, exitPartial, code, stderr)
		assert.Contains(t, stderr, "3 of 3 symbolic frames disagree")
		assert.Contains(t, stdout, fmt.Sprintf("[kdump-syms: %#x is vfs_write+0x2e1/0x440 in this dump]", vw.Addr+0x2e1))
		assert.Contains(t, stdout, "vfs_write+0xe1/0x441  [kdump-syms: vfs_write is 0x440 long in this dump]")
		assert.Contains(t, stdout, "nosuch_fn+0x1/0x2  [kdump-syms: no nosuch_fn in this dump]")
	})
}
