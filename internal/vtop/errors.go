package vtop

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ErrNotMapped means the kernel does not map the virtual address: a
// page-table entry on the way is not present or invalid, or the address is
// not canonical. The dump is not broken; the address is not in use.
var ErrNotMapped = errors.New("vtop: address not mapped")

// space is FaultError.Space for every fault this package reports.
const space = "kernel virtual"

// EntryError reports the page-table entry where a walk stopped: the
// *memory.FaultError of the virtual address wraps it. Err is why: a fault
// reading the entry (ErrNotSaved, ...), ErrNotMapped for an entry that is
// not present, memory.ErrCorrupt for one that cannot be.
type EntryError struct {
	Level string // the table: "pgd", "p4d", "pud", "pmd", "pte"; s390x's "region-first" ...
	Addr  uint64 // the entry's physical address
	Entry uint64 // the entry, when it was read (Read)
	Read  bool
	What  string // what is wrong with the entry that was read: "not present", ...
	Err   error
}

func (e *EntryError) Error() string {
	s := fmt.Sprintf("%s entry at physical %#x", e.Level, e.Addr)
	if e.Read {
		s = fmt.Sprintf("%s entry %#x at physical %#x %s", e.Level, e.Entry, e.Addr, e.What)
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *EntryError) Unwrap() error { return e.Err }

// entryFault is the fault of va for the entry of level at physical address
// at that could not be read.
func entryFault(va uint64, level string, at uint64, err error) error {
	return memory.Fault(va, space, "", &EntryError{Level: level, Addr: at, Err: err})
}

// badEntry is the fault of va for an entry that was read and stops the walk.
func badEntry(va uint64, level string, entry, at uint64, what string, err error) error {
	return memory.Fault(va, space, "", &EntryError{Level: level, Addr: at, Entry: entry, Read: true, What: what, Err: err})
}
