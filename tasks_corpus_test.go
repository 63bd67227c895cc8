package kdumpsyms_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/tasks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTasksCorpus compares the task list read from each guest's dump with
// the guest's /proc/*/task/*/stat captured just before the crash: the same
// tasks, each with the same thread group, parent, CPU, comm and state.
//
// How they are matched: by TID. The capture is one busybox head process
// reading the files the shell listed before starting it, so the capture's
// own process is not in it; the tar and sync the shell runs after it have
// exited by the crash, so every task of the dump but the idle tasks (which
// /proc does not show) must be in the capture, and every captured task in
// the dump. A task's state may have changed between the capture and the
// crash only if it is on a CPU at the crash (the crashing task) or is the
// capture shell (init, PID 1, waiting for head at the capture), or if it
// was sleeping (S, I) at the capture and is runnable and queued (R, on_rq)
// at the crash: woken after the capture (the tar and sync that follow it
// wake kworkers and kblockd; on a one-CPU guest they wait for the CPU the
// crashing shell holds).
// /proc prints a kernel thread's full name and a workqueue worker's
// "-WORKQUEUE" suffix where task_struct.comm holds 15 bytes
// (fs/proc/array.c, proc_task_name): such a comm matches as a prefix.
func TestTasksCorpus(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		want, ok := g.ProcTasks(t)
		if !ok {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			s, f := oneDumpSession(t, g, true)
			list := guestTasks(t, g, s, f)
			assert.NoError(t, list.Err())
			got := map[int]*tasks.Task{}
			for i := range list.Tasks {
				tk := &list.Tasks[i]
				if tk.Idle {
					continue
				}
				require.NotContains(t, got, int(tk.PID), "PID %d twice", tk.PID)
				got[int(tk.PID)] = tk
			}
			var bad []string
			seen := map[int]bool{}
			nD, nWoken := 0, 0
			for _, w := range want {
				seen[w.TID] = true
				tk := got[w.TID]
				if tk == nil {
					bad = append(bad, fmt.Sprintf("task %d (%s) captured, not in the dump", w.TID, w.Comm))
					continue
				}
				if w.State == 'D' && tk.State == 'D' {
					nD++
				}
				woken := tk.State == 'R' && tk.OnRQ && (w.State == 'S' || w.State == 'I')
				changed := tk.OnCPU || tk.PID == 1 || woken
				if woken {
					nWoken++
				}
				if int(tk.TGID) != w.PID || int(tk.PPID) != w.PPID || int(tk.CPU) != w.CPU ||
					(!changed && tk.State != w.State) || !sameComm(tk.Comm, w.Comm) {
					bad = append(bad, fmt.Sprintf("task %d: dump tgid %d ppid %d cpu %d state %c comm %q; /proc tgid %d ppid %d cpu %d state %c comm %q",
						w.TID, tk.TGID, tk.PPID, tk.CPU, tk.State, tk.Comm, w.PID, w.PPID, w.CPU, w.State, w.Comm))
				}
			}
			for pid, tk := range got {
				if !seen[pid] {
					bad = append(bad, fmt.Sprintf("task %d (%s) in the dump, not captured", pid, tk.Comm))
				}
			}
			assert.Empty(t, bad)
			t.Logf("%s: %d tasks (%d captured), %d in D state as captured, %d woken since the capture", f, len(list.Tasks), len(want), nD, nWoken)
		})
	}
}

// sameComm reports whether the dump's comm is the name /proc printed: the
// same, or its first 15 bytes (a kernel thread's full name), or it
// followed by "-" and a workqueue's name (a worker).
func sameComm(dump, proc string) bool {
	if dump == proc {
		return true
	}
	rest, ok := strings.CutPrefix(proc, dump)
	return ok && (len(dump) == 15 || strings.HasPrefix(rest, "-"))
}

// TestTaskStacksCorpus compares each task's stack unwound from the dump
// (x86_64: the switch frame and the ORC tables; arm64: cpu_context and
// the frame records) with its
// /proc/PID/task/TID/stack captured just before the crash, for every task
// whose state did not change in between (see TestTasksCorpus): the same
// functions in the same order. /proc leaves out the scheduler's and the
// locking functions (kernel/stacktrace.c stack_trace_consume_entry_nosched:
// in_sched_functions, the __sched and __lock text), so the unwound frames
// in [__sched_text_start, __sched_text_end) and [__lock_text_start,
// __lock_text_end) are left out before comparing.
func TestTaskStacksCorpus(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		want, ok := g.ProcTasks(t)
		stacks, ok2 := g.ProcStacks(t)
		if !ok || !ok2 || (g.ArchName() != "x86_64" && g.ArchName() != "arm64") {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			s, f := oneDumpSession(t, g, true)
			list := guestTasks(t, g, s, f)
			var skip [][2]uint64
			for _, r := range [][2]string{{"__sched_text_start", "__sched_text_end"}, {"__lock_text_start", "__lock_text_end"}} {
				a, err1 := s.Chain().LookupName(r[0])
				b, err2 := s.Chain().LookupName(r[1])
				require.NoError(t, err1)
				require.NoError(t, err2)
				skip = append(skip, [2]uint64{a.Addr, b.Addr})
			}
			byPID := map[int]*tasks.Task{}
			for i := range list.Tasks {
				byPID[int(list.Tasks[i].PID)] = &list.Tasks[i]
			}
			compared, nD := 0, 0
			for _, w := range want {
				tk := byPID[w.TID]
				if tk == nil || tk.OnCPU || tk.PID == 1 || tk.State != w.State {
					continue // its state changed: its stack may have too
				}
				st := s.TaskStack(tk)
				require.NotEmpty(t, st.Unwinder, "task %d: %v", tk.PID, st.Stop.Err)
				var got []string
			frames:
				for _, fr := range st.Frames {
					for _, r := range skip {
						if fr.PC >= r[0] && fr.PC < r[1] {
							continue frames
						}
					}
					sym, err := s.Chain().Lookup(fr.PC)
					if assert.NoError(t, err, "task %d: frame %#x", tk.PID, fr.PC) {
						got = append(got, sym.Name)
					}
				}
				assert.Equal(t, stacks[w.TID], got, "task %d (%s) state %c; stop: %s", tk.PID, tk.Comm, tk.State, st.Stop)
				compared++
				if tk.State == 'D' {
					nD++
				}
			}
			assert.NotZero(t, nD, "no task in D state compared")
			t.Logf("%s: %d stacks compared with /proc, %d of them in D state", f, compared, nD)
		})
	}
}

// guestTasks returns the session's task list; it skips the test on a
// guest whose kernel has no BTF (the task list needs it) and fails on any
// other error.
func guestTasks(t *testing.T, g *testutil.CorpusGuest, s *kdumpsyms.Session, f testutil.DumpFormat) *tasks.List {
	t.Helper()
	list, err := s.Tasks()
	var ne *kdumpsyms.NeedsError
	if errors.As(err, &ne) && ne.Needs == kdumpsyms.NeedBTF && g.Manifest.BTF != nil && !*g.Manifest.BTF {
		t.Skipf("%s has no BTF: %v", g.Name, err)
	}
	require.NoError(t, err, "%s", f)
	return list
}
