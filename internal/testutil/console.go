package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Dmesg returns what `dmesg` printed in the guest just before the crash
// (issue 15's ground truth for the kernel log), and false for a guest whose
// ground truth predates its capture.
func (g *CorpusGuest) Dmesg(tb testing.TB) ([]byte, bool) {
	tb.Helper()
	return g.optional(tb, "dmesg")
}

// ConsoleLog returns the guest's serial console as QEMU wrote it (CRLF line
// ends), which holds the kernel's own panic report and call trace after the
// lines dmesg had; false for a guest whose ground truth predates it.
func (g *CorpusGuest) ConsoleLog(tb testing.TB) ([]byte, bool) {
	tb.Helper()
	return g.optional(tb, "console.log")
}

// ConsoleLines returns ConsoleLog split into lines without their CR LF.
func (g *CorpusGuest) ConsoleLines(tb testing.TB) ([]string, bool) {
	tb.Helper()
	b, ok := g.ConsoleLog(tb)
	if !ok {
		return nil, false
	}
	var out []string
	for line := range bytes.Lines(b) {
		out = append(out, string(bytes.TrimRight(line, "\r\n")))
	}
	return out, true
}

func (g *CorpusGuest) optional(tb testing.TB, name string) ([]byte, bool) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(g.Dir, name))
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		tb.Fatalf("testutil: corpus guest %s: %v", g.Name, err)
	}
	return b, true
}
