//go:build unix

package vmcore

import (
	"os"
	"syscall"
)

// openNonblock opens a FIFO for reading without waiting for a writer.
func openNonblock(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
