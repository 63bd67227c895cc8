package vtop

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// ErrNotMapped means the kernel does not map the virtual address: a
// page-table entry on the way is not present or invalid, or the address is
// not canonical. The dump is not broken; the address is not in use.
var ErrNotMapped = errors.New("vtop: address not mapped")

// space is FaultError.Space for every fault this package reports.
const space = memory.SpaceKernelVirtual

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

// MissingError reports what the translation of Arch needs from VMCOREINFO
// and the dump lacks: Key is the line, as VMCOREINFO spells it
// ("SYMBOL(swapper_pg_dir)", "NUMBER(VA_BITS)", "PAGESIZE"), or "" when
// there is no VMCOREINFO at all; Why, when set, says why nothing else
// stood in for it. It matches vmcoreinfo.ErrMissingInfo.
type MissingError struct {
	Arch string
	Key  string
	Why  string
}

func (e *MissingError) Error() string {
	key := e.Key
	if key == "" {
		key = "no VMCOREINFO"
	}
	if e.Why != "" {
		key += " (" + e.Why + ")"
	}
	return fmt.Sprintf("vtop: %s: %s: %v", e.Arch, key, vmcoreinfo.ErrMissingInfo)
}

// Is reports whether target is vmcoreinfo.ErrMissingInfo.
func (e *MissingError) Is(target error) bool { return target == vmcoreinfo.ErrMissingInfo }

// UnsupportedError reports a parameter of the machine that the
// translation of Arch does not support: What is "pointer size", "page
// size" or "VA_BITS", Val its value, and Supported, when set, what is
// ("Sv39, Sv48 or Sv57"). It matches errors.ErrUnsupported.
type UnsupportedError struct {
	Arch      string
	What      string
	Val       uint64
	Supported string
}

func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("vtop: %s %s %d", e.Arch, e.What, e.Val)
	if e.Supported != "" {
		s += " (not " + e.Supported + ")"
	}
	return s + ": " + errors.ErrUnsupported.Error()
}

// Is reports whether target is errors.ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

// missing is the *MissingError of arch for key ("" for no VMCOREINFO).
func missing(arch, key string) error { return &MissingError{Arch: arch, Key: key} }

// unsupported is the *UnsupportedError of arch for what of value val.
func unsupported(arch, what string, val uint64) error {
	return &UnsupportedError{Arch: arch, What: what, Val: val}
}
