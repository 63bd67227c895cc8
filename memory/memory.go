package memory

import (
	"encoding/binary"
	"fmt"
)

// Reader reads memory at an address. It follows io.ReaderAt's contract: when
// n < len(p) the error explains why, and it is non-nil. A read that fails
// because a page was not saved in the dump returns a *FaultError whose cause
// wraps ErrNotSaved. Implementations must be safe for concurrent use only if
// they document it.
type Reader interface {
	ReadAt(p []byte, addr uint64) (n int, err error)
}

// ReaderFunc adapts a function to a Reader.
type ReaderFunc func(p []byte, addr uint64) (int, error)

// ReadAt calls f(p, addr).
func (f ReaderFunc) ReadAt(p []byte, addr uint64) (int, error) { return f(p, addr) }

// ErrNotSaved means the memory at the address is not in the dump: the page
// was excluded by filtering, never saved, or lies outside every saved range.
// The dump is not broken; the data is absent.
var ErrNotSaved error = &classError{"page not present in dump", ClassNotSaved}

// ErrCorrupt means data read from a dump is inconsistent: typically this
// indicates a damaged, truncated or crafted file.
var ErrCorrupt error = &classError{"corrupt dump data", ClassCorrupt}

// Space names an address space a fault happened in.
type Space string

const (
	SpacePhysical      Space = "physical"       // the dump's physical memory
	SpaceKernelVirtual Space = "kernel virtual" // translated kernel addresses
	SpaceVirtual       Space = "virtual"        // an ELF core's own virtual map (p_vaddr)
)

// FaultError reports a read that failed at Addr.
//
// Space names the address space (SpacePhysical, SpaceKernelVirtual, ...), Op what
// was being done when the read failed (for example "pud entry" during a
// page-table walk, or "page descriptor for pfn 0x1234"); both may be empty.
// Err is the cause: ErrNotSaved, ErrCorrupt, an I/O error, or another
// *FaultError from the layer below.
type FaultError struct {
	Addr  uint64
	Space Space
	Op    string
	Err   error
}

func (e *FaultError) Error() string {
	s := "memory"
	if e.Space != "" {
		s = string(e.Space) + " memory"
	}
	s += fmt.Sprintf(" at %#x", e.Addr)
	if e.Op != "" {
		s += ": " + e.Op
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *FaultError) Unwrap() error { return e.Err }

// Fault is shorthand for &FaultError{Addr: addr, Space: space, Op: op, Err: err}.
func Fault(addr uint64, space Space, op string, err error) *FaultError {
	return &FaultError{Addr: addr, Space: space, Op: op, Err: err}
}

// ReadFull reads exactly len(p) bytes at addr. It returns a non-nil error
// whenever fewer bytes were read, even if the Reader returned nil, and
// checks that addr+len(p) does not wrap around the address space.
func ReadFull(r Reader, p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	if addr+uint64(len(p))-1 < addr {
		return Fault(addr, "", fmt.Sprintf("read of %d bytes wraps the address space", len(p)), ErrCorrupt)
	}
	n, err := r.ReadAt(p, addr)
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = Fault(addr+uint64(n), "", "short read", ErrNotSaved)
	}
	return err
}

// Uint64 reads one 8-byte value at addr in byte order bo.
func Uint64(r Reader, bo binary.ByteOrder, addr uint64) (uint64, error) {
	var b [8]byte
	if err := ReadFull(r, b[:], addr); err != nil {
		return 0, err
	}
	return bo.Uint64(b[:]), nil
}

// Uint32 reads one 4-byte value at addr in byte order bo.
func Uint32(r Reader, bo binary.ByteOrder, addr uint64) (uint32, error) {
	var b [4]byte
	if err := ReadFull(r, b[:], addr); err != nil {
		return 0, err
	}
	return bo.Uint32(b[:]), nil
}

// CString reads a NUL-terminated string of at most max bytes (the NUL not
// counted) at addr. It reads in small chunks so that a string near the end of
// a mapped range is still found. A string with no NUL within max bytes is an
// error wrapping ErrCorrupt.
func CString(r Reader, addr uint64, max int) (string, error) {
	var out []byte
	var chunk [64]byte
	for len(out) <= max {
		// Do not cross a 64-byte boundary, so that a read never spans into a
		// page that may be absent when the string ends before it.
		n := 64 - int(addr%64)
		got, err := r.ReadAt(chunk[:n], addr)
		if got < n && err == nil {
			err = Fault(addr+uint64(got), "", "short read", ErrNotSaved)
		}
		// A string may end just before unreadable memory: use what was
		// read before giving up.
		if err != nil {
			n = got
		}
		for i := 0; i < n; i++ {
			if chunk[i] == 0 {
				out = append(out, chunk[:i]...)
				if len(out) > max {
					return "", Fault(addr, "", fmt.Sprintf("string longer than %d bytes", max), ErrCorrupt)
				}
				return string(out), nil
			}
		}
		if err != nil {
			return "", err
		}
		out = append(out, chunk[:n]...)
		addr += uint64(n)
	}
	return "", Fault(addr, "", fmt.Sprintf("string longer than %d bytes", max), ErrCorrupt)
}
