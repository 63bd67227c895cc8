package elfcore

import (
	"fmt"
	"runtime/debug"
)

// copyMapped copies from the memory-mapped file. If the file shrank after
// it was mapped, touching the lost pages raises SIGBUS; the runtime turns
// that into a panic for this goroutine only while SetPanicOnFault is set,
// and the panic becomes an error here instead of a crash.
func copyMapped(p, data []byte, off int64) (n int, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("elfcore: reading mapped file at %#x: %v", off, r)
		}
	}()
	return copy(p, data[off:]), nil
}
