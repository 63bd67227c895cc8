package tasks

// Task state bits, include/linux/sched.h (the same values from 5.10 to at
// least 6.18; TASK_RTLOCK_WAIT appeared in 5.15, TASK_FROZEN in 6.1, bits
// no earlier kernel sets).
const (
	taskInterruptible   = 0x0001
	taskUninterruptible = 0x0002
	taskStopped         = 0x0004 // __TASK_STOPPED
	taskTraced          = 0x0008 // __TASK_TRACED
	exitDead            = 0x0010 // in exit_state
	exitZombie          = 0x0020 // in exit_state
	taskParked          = 0x0040
	taskNoload          = 0x0400
	taskRTLockWait      = 0x1000
	taskFrozen          = 0x8000

	// TASK_REPORT: the bits /proc reports; TASK_IDLE is
	// TASK_UNINTERRUPTIBLE|TASK_NOLOAD, reported as TASK_REPORT_IDLE.
	taskReport = taskInterruptible | taskUninterruptible | taskStopped | taskTraced |
		exitDead | exitZombie | taskParked
	taskIdle = taskUninterruptible | taskNoload
)

// stateChars is task_index_to_char's "RSDTtXZPI" (include/linux/sched.h),
// the first letters of fs/proc/array.c's task_state_array, indexed by
// fls() of the reported state.
const stateChars = "RSDTtXZPI"

// StateLetter returns the letter /proc/PID/stat prints for a task whose
// __state (state before 5.14) is state and whose exit_state is exit,
// following __task_state_index (include/linux/sched.h, 6.1 and 6.12; the
// idle and RT-lock cases exist since 4.14 and 5.15, the frozen one since
// 6.1).
func StateLetter(state, exit uint64) byte {
	s := (state | exit) & taskReport
	if state&taskIdle == taskIdle {
		s = taskReport + 1 // TASK_REPORT_IDLE
	}
	if state&taskRTLockWait != 0 || state&taskFrozen != 0 {
		s = taskUninterruptible
	}
	return stateChars[fls(s)]
}

// fls is the kernel's fls: 1 + the index of the highest set bit, 0 for 0.
func fls(x uint64) int {
	n := 0
	for x != 0 {
		n++
		x >>= 1
	}
	return n
}
