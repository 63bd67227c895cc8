package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// truthLines returns the lines of g.KallsymsText whose kind is in kinds, in
// file order.
func truthLines(t testing.TB, g *testutil.CorpusGuest, kinds ...testutil.SymKind) []byte {
	t.Helper()
	var out []byte
	for line := range bytes.Lines(g.KallsymsText(t)) {
		mod := ""
		if i := bytes.IndexByte(line, '\t'); i >= 0 {
			mod = strings.Trim(string(line[i+1:]), "[]\n")
		}
		for _, k := range kinds {
			if testutil.ClassifyModule(mod) == k {
				out = append(out, line...)
				break
			}
		}
	}
	return out
}

// guestDump is a guest and the one dump of it a test runs on.
type guestDump struct {
	g    *testutil.CorpusGuest
	dump string
}

// preferredFormats are the formats corpusDumps picks from, the smallest
// first: on the amd64 guests a makedumpfile kdump, elsewhere QEMU's ELF;
// on a kdump capture makedumpfile's file, else (arm64) the copy of
// /proc/vmcore.
var preferredFormats = []testutil.DumpFormat{testutil.DumpZstd, testutil.DumpZlib, testutil.DumpQEMUELF, testutil.DumpProcVmcore}

// pickDumps returns one dump of each of guests, in manifest order, the
// first of formats present, and skips the test when there is none.
func pickDumps(t *testing.T, guests []*testutil.CorpusGuest, formats []testutil.DumpFormat) []guestDump {
	t.Helper()
	var out []guestDump
	for _, g := range guests {
		for _, f := range formats {
			if d, ok := g.Dump(f); ok {
				out = append(out, guestDump{g, d.Paths[0]})
				break
			}
		}
	}
	if len(out) == 0 {
		t.Skip("no corpus dumps: run testdata/vmcores/generate")
	}
	return out
}

// guestSample returns the dumps of g that a test of a command over the
// whole dump (dmesg, panic) runs on: the one pickDumps picks, or with
// testutil.Thorough every one. Each format holds the same pages and notes
// (vmcore's TestCorpusSamePages and TestCorpusOpen check them format by
// format) and decodes to the same symbols (the root package's
// TestSessionCorpus).
func guestSample(g *testutil.CorpusGuest) []testutil.GuestDump {
	if testutil.Thorough() {
		return g.Dumps()
	}
	for _, f := range preferredFormats {
		if d, ok := g.Dump(f); ok {
			return []testutil.GuestDump{d}
		}
	}
	return nil
}

// corpusDumps returns one dump of each corpus guest, in preferredFormats'
// order.
func corpusDumps(t *testing.T) []guestDump {
	t.Helper()
	return pickDumps(t, testutil.Corpus(t), preferredFormats)
}

// elfFirst is the order of formats for tests that read a dump's symbols
// but not its container: QEMU's ELF, whose pages are read without
// decompressing them. corpusDumps's kdump files are decoded by
// TestAllCorpus.
var elfFirst = []testutil.DumpFormat{testutil.DumpQEMUELF, testutil.DumpProcVmcore, testutil.DumpZstd, testutil.DumpZlib}

// sampleDumps returns one dump, in elfFirst order, of each guest
// testutil.Sample picks from names.
func sampleDumps(t *testing.T, names ...string) []guestDump {
	t.Helper()
	return pickDumps(t, testutil.Sample(t, names...), elfFirst)
}

// textMatch is an io.Writer that compares what is written with want as it
// comes, keeping only what a failure message needs: a command's output is
// checked without being held (`all` prints 43 MB on riscv64).
type textMatch struct {
	want []byte
	n    int    // bytes written
	diff int    // offset of the first byte that differs, -1 if none yet
	got  []byte // the output's line holding diff, from its start
}

func newTextMatch(want []byte) *textMatch { return &textMatch{want: want, diff: -1} }

func (m *textMatch) Write(p []byte) (int, error) {
	if m.diff < 0 {
		w := m.want[min(m.n, len(m.want)):]
		k := 0
		if len(w) >= len(p) && bytes.Equal(w[:len(p)], p) {
			k = len(p)
		} else {
			for k < len(p) && k < len(w) && p[k] == w[k] {
				k++
			}
		}
		if k < len(p) {
			m.diff = m.n + k
			// Up to diff the output is want: its line starts there.
			start := bytes.LastIndexByte(m.want[:m.diff], '\n') + 1
			m.got = append(m.got, m.want[start:m.diff]...)
			m.addTail(p[k:])
		}
	} else {
		m.addTail(p)
	}
	m.n += len(p)
	return len(p), nil
}

// addTail adds to got up to the end of its line (at most 1 KiB).
func (m *textMatch) addTail(p []byte) {
	if bytes.IndexByte(m.got, '\n') >= 0 || len(m.got) >= 1024 {
		return
	}
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		p = p[:i+1]
	}
	m.got = append(m.got, p[:min(len(p), 1024-len(m.got))]...)
}

// mismatch returns "" when the output was want, byte for byte, and
// otherwise a message naming the first line that differs.
func (m *textMatch) mismatch() string {
	diff := m.diff
	if diff < 0 {
		if m.n == len(m.want) {
			return ""
		}
		diff = m.n // the output stopped early
	}
	line := bytes.Count(m.want[:min(diff, len(m.want))], []byte("\n")) + 1
	start := bytes.LastIndexByte(m.want[:min(diff, len(m.want))], '\n') + 1
	wl := m.want[start:]
	if i := bytes.IndexByte(wl, '\n'); i >= 0 {
		wl = wl[:i+1]
	}
	got := m.got
	if m.diff < 0 {
		got = m.want[start:diff] // what was written of the line, before the end
	}
	return fmt.Sprintf("output differs at line %d (%d bytes, want %d):\n want %q\n  got %q", line, m.n, len(m.want), wl, got)
}

// runCLIMatch runs the command with its output compared with want as it
// is written (see textMatch): mismatch is "" when it was want.
func runCLIMatch(want []byte, stdin io.Reader, args ...string) (code int, stderr, mismatch string) {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	m := newTextMatch(want)
	var e bytes.Buffer
	code = run(args, stdin, m, &e)
	return code, e.String(), m.mismatch()
}

func TestTextMatch(t *testing.T) {
	want := []byte("a 1\nb 2\nc 3\n")
	for _, tc := range []struct {
		name   string
		writes []string
		msg    string // "" when the output is want
	}{
		{"same", []string{"a 1\nb", " 2\nc 3\n"}, ""},
		{"one write", []string{"a 1\nb 2\nc 3\n"}, ""},
		{"differs", []string{"a 1\nb", " 9\nc 3\n"}, `line 2 (12 bytes, want 12):` + "\n" + ` want "b 2\n"` + "\n" + `  got "b 9\n"`},
		{"shorter", []string{"a 1\nb 2\n"}, `line 3 (8 bytes, want 12):` + "\n" + ` want "c 3\n"` + "\n" + `  got ""`},
		{"cut in a line", []string{"a 1\nb"}, `line 2 (5 bytes, want 12):` + "\n" + ` want "b 2\n"` + "\n" + `  got "b"`},
		{"longer", []string{"a 1\nb 2\nc 3\nd", " 4\n"}, `line 4 (16 bytes, want 12):` + "\n" + ` want ""` + "\n" + `  got "d 4\n"`},
		{"empty", nil, `line 1 (0 bytes, want 12):` + "\n" + ` want "a 1\n"` + "\n" + `  got ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTextMatch(want)
			for _, w := range tc.writes {
				if n, err := m.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			got := m.mismatch()
			if tc.msg == "" && got != "" {
				t.Fatalf("mismatch %q, want none", got)
			}
			if tc.msg != "" && !strings.HasSuffix(got, tc.msg) {
				t.Fatalf("mismatch %q, want it to end in %q", got, tc.msg)
			}
		})
	}
}
