// Command kdump-syms recovers a Linux kernel's symbols from a crash dump.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// `kdump-syms all VMCORE | head` is the usual way to look: with SIGPIPE
	// ignored, a write to the closed pipe fails with EPIPE, which run
	// treats as the reader having seen enough, instead of the process
	// dying of the signal (and `go run` printing "signal: broken pipe").
	signal.Ignore(syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
