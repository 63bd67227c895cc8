//go:build linux || darwin || freebsd || netbsd || openbsd

package elfcore

import (
	"math"
	"os"
	"syscall"
)

// mmapFile maps the file read-only, or returns nil when it cannot (empty,
// too large for the address space, or the call fails); the caller then
// reads through the file.
func mmapFile(fh *os.File, size int64) ([]byte, func()) {
	if size <= 0 || uint64(size) > math.MaxInt || math.MaxInt == math.MaxInt32 {
		return nil, nil
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil
	}
	return data, func() { syscall.Munmap(data) }
}
