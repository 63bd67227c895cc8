package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCaptureStackCorpus: on every corpus dump that is a kdump capture
// (the crashing CPU's first frame in __crash_kexec, where crash_setup_regs
// saved its registers), panic's stack is __crash_kexec and then exactly
// the console's call trace from vpanic or panic on (7.x: vpanic, then
// panic; before: panic), the frame after __crash_kexec
// found on x86_64 by a recovery that names a direct call to it (not a
// weak one), on arm64 by its frame record.
// The default run reads one dump of each guest, testutil.Thorough every
// one; on the committed extracts it needs the pages that walk reads
// (Session.Unwind's: the stack, the text before each return address
// tried, the ORC entries), which extract records.
func TestCaptureStackCorpus(t *testing.T) {
	ran := 0
	for _, g := range testutil.Corpus(t) {
		console, err := os.ReadFile(filepath.Join(g.Dir, "console.log"))
		if err != nil {
			continue
		}
		// From 7.x's vpanic on, else panic: the functions after
		// __crash_kexec.
		want := consoleTrace(strings.ReplaceAll(string(console), "\r", ""), "vpanic", "panic")
		dumps := g.Dumps()
		if !testutil.Thorough() && len(dumps) > 1 {
			dumps = dumps[:1]
		}
		for _, d := range dumps {
			t.Run(g.Name+"/"+string(d.Format), func(t *testing.T) {
				args := []string{"panic", "--format", "json", d.Paths[0]}
				for _, p := range d.Paths[1:] {
					args = append(args, "--part", p)
				}
				_, stdout, stderr := runCLI(args...)
				var rep panicReport
				require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stderr)
				if rep.CrashingCPU < 0 {
					t.Skip("the crashing CPU is not told: " + stderr)
				}
				c := rep.CPUs[rep.CrashingCPU]
				if len(c.Frames) == 0 || !strings.HasPrefix(c.Frames[0].Symbol, "__crash_kexec+") {
					t.Skip("not a kdump capture: the crashing CPU is not in __crash_kexec")
				}
				if d.Extract && len(c.Frames) == 1 && strings.Contains(c.Stop, "page not present in dump") {
					// An extract made before the recovery read the
					// stack holds none of it.
					t.Skipf("the committed extract lacks the pages the recovery reads (remake it with extract-corpus): %s", c.Stop)
				}
				ran++
				require.NotEmpty(t, want, "no call trace after panic on the console")
				var got []string
				for _, f := range c.Frames {
					name, _, _ := strings.Cut(f.Symbol, "+")
					got = append(got, name)
				}
				require.Greater(t, len(got), 1, "stopped: %s", c.Stop)
				assert.Equal(t, want, got[1:], "stopped: %s", c.Stop)
				assert.Contains(t, c.Stop, "end of stack")
				if g.ArchName() != "x86_64" {
					// arm64's crash_setup_regs saves x29, __crash_kexec's
					// frame record: the frames follow from it.
					assert.Empty(t, c.Frames[1].FoundBy)
					return
				}
				assert.Contains(t, c.Frames[1].FoundBy, "stack scan")
				assert.Contains(t, c.Frames[1].FoundBy, "a direct call to the function")
				assert.NotContains(t, c.Frames[1].FoundBy, "weak")
			})
		}
	}
	if ran == 0 {
		t.Skip("no kdump capture in the corpus (testdata/vmcores/generate makes them)")
	}
}

// TestPanicTextFoundBy: a recovered frame is printed after a line saying
// how it was found.
func TestPanicTextFoundBy(t *testing.T) {
	rep := &panicReport{CrashingCPU: -1, LogCPU: -1, PID: -1, CPUs: []cpuDump{{
		Unwinder: "ORC",
		Frames: []frame{
			{PC: "ffffffff811cb920", Symbol: "__crash_kexec+0x120/0x140"},
			{PC: "ffffffff81d1c1a2", Symbol: "panic+0x12f/0x320", FoundBy: "stack scan (…): …"},
		},
		Stop: "end of stack (entry from user space)",
	}}}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	rep.writeText(w)
	require.NoError(t, w.Flush())
	assert.Contains(t, b.String(), "   __crash_kexec+0x120/0x140\n   -- next frame found by stack scan (…): …\n   panic+0x12f/0x320\n")
}
