// Command dstate runs inside the corpus guests (static, no cgo) to leave a
// task in uninterruptible sleep (ps state D) for the crash dump to hold: it
// clones a child with CLONE_VFORK (and without CLONE_VM, so the child has
// its own copy of memory), and the child stops itself with SIGSTOP before
// it ever execs or exits. The kernel keeps a vfork parent in
// wait_for_vfork_done until the child execs or exits (kernel/fork.c,
// kernel_clone), waiting with TASK_KILLABLE (TASK_WAKEKILL |
// TASK_UNINTERRUPTIBLE), which /proc/PID/stat reports as D
// (fs/proc/array.c, task_state_array; TASK_WAKEKILL is not in
// TASK_REPORT). So the calling thread of this process is in state D, the
// child in state T, the process's other (Go runtime) threads in S.
package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

const cloneVfork = 0x4000 // CLONE_VFORK, include/uapi/linux/sched.h

func main() {
	fmt.Printf("dstate: pid %d: vfork child stops itself, this thread waits in D\n", os.Getpid())
	flags := uintptr(cloneVfork | syscall.SIGCHLD)
	var r1 uintptr
	var errno syscall.Errno
	if runtime.GOARCH == "s390x" {
		// s390x's clone takes the new stack first (arch/s390/kernel/process.c).
		r1, _, errno = syscall.RawSyscall6(syscall.SYS_CLONE, 0, flags, 0, 0, 0, 0)
	} else {
		r1, _, errno = syscall.RawSyscall6(syscall.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	}
	if errno != 0 {
		fmt.Println("dstate: clone:", errno)
		os.Exit(1)
	}
	if r1 == 0 {
		// The child: raw system calls only (it is a copy of a Go process
		// with one thread), as syscall.forkAndExecInChild does.
		pid, _, _ := syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
		for {
			syscall.RawSyscall(syscall.SYS_KILL, pid, uintptr(syscall.SIGSTOP), 0)
		}
	}
	// Reached only if the child ever runs on and dies.
	fmt.Println("dstate: vfork child", r1, "went away")
	select {}
}
