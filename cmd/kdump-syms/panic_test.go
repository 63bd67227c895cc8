package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var consolePanic = regexp.MustCompile(`\] (Kernel panic - not syncing: .*)`)
var consoleCPU = regexp.MustCompile(`\] CPU: (\d+) (?:UID: \d+ )?PID: (\d+) Comm: (\S+)`)

// consoleIdle and consoleSwapper match what sysrq l (every CPU's
// backtrace, asked for by the /init of guests with several CPUs) prints
// for a CPU running its idle task: where it idles, or, when an interrupt
// was being handled there, the backtrace of PID 0.
var (
	consoleIdle    = regexp.MustCompile(`\] NMI backtrace for cpu (\d+) skipped: idling at ([A-Za-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+)`)
	consoleSwapper = regexp.MustCompile(`\] CPU: (\d+) (?:UID: \d+ )?PID: 0 Comm: swapper/`)
)

// idleCPUs returns the CPUs the console shows running their idle task
// before the panic, each with where it idled ("func+off/size"; "" when not
// told).
func idleCPUs(console string) map[int]string {
	out := map[int]string{}
	for _, m := range consoleSwapper.FindAllStringSubmatch(console, -1) {
		n, _ := strconv.Atoi(m[1])
		out[n] = ""
	}
	for _, m := range consoleIdle.FindAllStringSubmatch(console, -1) {
		n, _ := strconv.Atoi(m[1])
		out[n] = m[2]
	}
	return out
}

// TestPanicCorpus: on a dump of every corpus guest (every dump with
// testutil.Thorough; see guestSample), where it holds the log, panic names
// the panic the console printed, the CPU and task the console named, finds
// the crashing CPU's register note and symbolizes its program counter.
func TestPanicCorpus(t *testing.T) {
	ran, others := 0, 0
	for _, g := range testutil.Corpus(t) {
		console, err := os.ReadFile(filepath.Join(g.Dir, "console.log"))
		if err != nil {
			continue
		}
		text := strings.ReplaceAll(string(console), "\r", "")
		wantMsg := consolePanic.FindStringSubmatch(text)
		require.NotNil(t, wantMsg, "no panic in %s's console log", g.Name)
		// The panic's "CPU: …" line follows it (sysrq l prints others before).
		wantCPU := consoleCPU.FindStringSubmatch(text[strings.Index(text, wantMsg[0]):])
		require.NotNil(t, wantCPU)
		for _, cd := range guestSample(g) {
			paths, f := cd.Paths, cd.Format
			t.Run(g.Name+"/"+string(f), func(t *testing.T) {
				args := []string{"panic", "--format", "json", paths[0]}
				for _, p := range paths[1:] {
					args = append(args, "--part", p)
				}
				code, stdout, stderr := runCLI(args...)
				if cd.Extract && code != exitOK {
					t.Skipf("the committed extract lacks the kernel log: %s", strings.TrimSpace(stderr))
				}
				require.Equal(t, exitOK, code, stderr)
				ran++
				var rep panicReport
				require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
				assert.True(t, rep.Panicked)
				assert.Equal(t, wantMsg[1], rep.Message)
				assert.Equal(t, wantCPU[1], itoa(rep.LogCPU))
				assert.Equal(t, wantCPU[2], itoa(rep.PID))
				assert.Equal(t, wantCPU[3], rep.Comm)
				require.Equal(t, rep.LogCPU, rep.CrashingCPU, "notes are in CPU order")
				c := rep.CPUs[rep.CrashingCPU]
				assert.True(t, c.Crashing)
				pcName := map[string]string{"arm64": "pc", "arm": "pc", "x86_64": "rip", "i386": "eip", "s390x": "psw_addr", "ppc64le": "nip", "riscv64": "pc"}[g.ArchName()]
				require.NotEmpty(t, pcName)
				realMode := false
				for _, r := range c.Registers {
					if r.Name == "msr" {
						msr, err := strconv.ParseUint(r.Value, 16, 64)
						require.NoError(t, err)
						// A pseries guest stops in RTAS (ibm,os-term),
						// in real mode: its nip is no kernel address.
						realMode = msr&ppcMSRIR == 0
					}
				}
				for _, r := range c.Registers {
					if g.Arch() == "armhf" && strings.HasPrefix(strings.TrimPrefix(r.Value, "0x"), "ffff0") {
						// The exception vectors' page (QEMU stopped the CPU
						// entering the IRQ vector), which no symbol holds.
						continue
					}
					if r.Name == pcName && !realMode {
						assert.NotEmpty(t, r.Symbol, "the crashing CPU's %s %s", r.Name, r.Value)
					}
				}
				// The crashing CPU's stack lists, in order, the functions of
				// the call trace the console printed from panic on (less
				// the "?" guesses of x86's stack scan).
				// From panic on (from vpanic where panic is not in it:
				// 7.x's 32-bit ARM trace goes from vpanic to a wrong
				// caller).
				want := consoleTrace(text, "panic", "vpanic")
				require.NotEmpty(t, want, "no call trace after panic on the console")
				if g.ArchName() == "arm" {
					// The kernel's unwind tables (docs/formats.md §12), and
					// a CPU dumped in supervisor mode (generate).
					require.Equal(t, "ARM unwind tables", c.Unwinder, c.Stop)
				}
				if c.Unwinder == "" {
					t.Logf("%s: %s", g.Name, c.Stop)
				} else {
					var got []string
					for _, f := range c.Frames {
						name, _, _ := strings.Cut(f.Symbol, "+")
						got = append(got, name)
					}
					j := 0
					for _, fn := range got {
						if j < len(want) && fn == want[j] {
							j++
						}
					}
					// On x86_64 kdump captures the walk goes on past
					// __crash_kexec, which has no ORC entry, from the return
					// address into panic found on the stack (issue 27).
					assert.Equal(t, len(want), j, "unwound %v; the console's trace from panic: %v (stopped: %s)", got, want, c.Stop)
				}
				// The other CPUs, stopped by panic's IPI: on riscv64 each
				// stack crosses the IPI's exception frame into the code it
				// interrupted, and ends in the idle loop's callers
				// (kernel/sched/idle.c: do_idle, cpu_startup_entry) or a
				// kernel thread's entry (kthread). A CPU sysrq l found idle
				// before the crash (guests with several CPUs, whose init
				// keeps to CPU 0) is in the idle loop, at the pc sysrq l
				// named where it did.
				idleAt := idleCPUs(text[:strings.Index(text, wantMsg[0])])
				for n, c := range rep.CPUs {
					if n == rep.CrashingCPU || c.Unwinder == "" || g.ArchName() != "riscv64" {
						continue
					}
					var got []string
					crossed := -1
					for i, f := range c.Frames {
						name, _, _ := strings.Cut(f.Symbol, "+")
						got = append(got, name)
						if f.ExceptionFrame != "" && crossed < 0 {
							crossed = i
						}
					}
					require.GreaterOrEqual(t, crossed, 0, "CPU %d crossed no exception frame: %v (stopped: %s)", n, got, c.Stop)
					rest := got[crossed:]
					idle := slices.Index(rest, "do_idle")
					if at, ok := idleAt[n]; ok {
						if at != "" {
							assert.Equal(t, at, c.Frames[crossed].Symbol, "CPU %d: the interrupted pc", n)
						}
						assert.Equal(t, []string{"do_idle", "cpu_startup_entry"}, rest[1:min(3, len(rest))], "CPU %d: %v (stopped: %s)", n, got, c.Stop)
					} else {
						assert.True(t, idle >= 0 && idle+1 < len(rest) && rest[idle+1] == "cpu_startup_entry" || slices.Contains(rest, "kthread"),
							"CPU %d ends in neither the idle loop nor a kernel thread: %v (stopped: %s)", n, got, c.Stop)
					}
					others++
				}
				// The report ends the log, with the panic line in it.
				require.NotEmpty(t, rep.Report)
				assert.Contains(t, strings.Join(rep.Report, "\n"), wantMsg[1])
			})
		}
	}
	if ran == 0 {
		t.Skip("no corpus dump with a console log holds the kernel log")
	}
	t.Logf("the stacks of %d CPUs that did not crash checked", others)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// traceLine matches a call trace entry: "  func+off/size" (x86_64, arm64,
// s390x, with "? " guesses and "[<addr>] " on older x86), riscv64's
// " [<addr>] func+off/size" (one space), ppc64's " [sp] [pc]
// func+off/size", and 32-bit ARM's "callee from caller+off/size", whose
// caller is the frame's function.
var traceLine = regexp.MustCompile(`^\[[ 0-9.]+\] (?: |\[[0-9a-f]+\] \[[0-9a-f]+\] )?(\? )?(?:\[<[0-9a-f]+>\] )?(?:[A-Za-z0-9_.]+ from )?([A-Za-z0-9_.]+)\+0x[0-9a-f]+/0x[0-9a-f]+`)

// ppcMSRIR is MSR[IR], instruction relocation: clear in real mode.
const ppcMSRIR = 0x20

// consoleTrace returns the functions of the console's call trace from the
// first of starts it holds (tried in that order) on, skipping the entries
// x86 marks "?" (found by scanning the stack, not by unwinding); nil when
// no trace holds any of them.
func consoleTrace(console string, starts ...string) []string {
	var block []string // the entries of the trace being read
	from := func() []string {
		for _, f := range starts {
			if i := slices.Index(block, f); i >= 0 {
				return block[i:]
			}
		}
		return nil
	}
	for _, line := range strings.Split(console, "\n") {
		m := traceLine.FindStringSubmatch(line)
		if m == nil {
			if out := from(); out != nil {
				return out
			}
			block = block[:0]
			continue
		}
		if m[1] == "" {
			block = append(block, m[2])
		}
	}
	return from()
}
