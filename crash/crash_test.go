package crash

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPickNote: the crashing CPU's note is the one at the report's CPU
// number, confirmed by its pr_pid where kdump wrote the task's PID; without
// a CPU number, the one note holding the report's PID; never a guess
// (a note index taken for a CPU number the report does not give).
func TestPickNote(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cpu, pid int
		pids     []int32
		note     int
		how      string
	}{
		{"kdump, pid confirms", 1, 77, []int32{0, 77}, 1, "notes are in CPU order; its pr_pid is the report's PID"},
		{"QEMU vCPU numbers", 1, 77, []int32{1, 2}, 1, "notes are in CPU order"},
		{"no CPU line, one note with the PID", -1, 77, []int32{5, 77, 6}, 1, "its pr_pid is the report's PID 77"},
		{"no CPU line, two notes with the PID", -1, 77, []int32{77, 77}, -1, ""},
		{"CPU beyond the notes", 4, 77, []int32{1, 2}, -1, ""},
		{"nothing known", -1, -1, []int32{1, 2}, -1, ""},
	} {
		note, how := pickNote(tc.cpu, tc.pid, tc.pids)
		assert.Equal(t, tc.note, note, tc.name)
		assert.Equal(t, tc.how, how, tc.name)
	}
	f := Find(nil, errors.New("no log"), []int32{1})
	assert.Nil(t, f.Report)
	assert.Equal(t, -1, f.Note)
	assert.Equal(t, -1, f.CPU())
	assert.EqualError(t, f.LogErr, "no log")
}
