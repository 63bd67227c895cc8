package bpfsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

var (
	// ErrCorrupt means an entry or a list is inconsistent: a cycle, a wild
	// pointer, end before start, a range or count beyond its cap, a name
	// without its NUL. Typically this indicates a damaged dump, or layouts
	// that do not belong to the kernel that wrote it.
	ErrCorrupt = memory.Classed("corrupt pseudo-symbol data", memory.ErrCorrupt)

	// ErrMissingInfo means a symbol the walk starts from is not in the
	// kernel's symbol table (a kernel without the feature, or kallsyms
	// without data symbols), or the layout source lacks a struct or field
	// the walk needs. The dump is not broken; the information is absent.
	ErrMissingInfo = memory.Classed("missing information", vmcoreinfo.ErrMissingInfo)
)

// WalkError reports a list that could not be followed past Addr (a node
// that cannot be read, a wild pointer, a cycle, or too many entries). The
// entries read before the break are kept.
type WalkError struct {
	List string // the list head's symbol, e.g. "bpf_kallsyms"
	Addr uint64 // the node where the walk stopped
	Err  error
}

func (e *WalkError) Error() string {
	return fmt.Sprintf("bpfsyms: list %s broken at %#x: %v", e.List, e.Addr, e.Err)
}

// Unwrap returns the cause: a *memory.FaultError or an error wrapping
// ErrCorrupt.
func (e *WalkError) Unwrap() error { return e.Err }

// EntryError reports one entry that was left out: its struct could not be
// read beyond the list node, or its contents are inconsistent.
type EntryError struct {
	List string // the list head's symbol
	Addr uint64 // the address of the entry's struct
	Err  error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("bpfsyms: %s entry at %#x: %v", e.List, e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *EntryError) Unwrap() error { return e.Err }

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrCorrupt)
}

func missing(format string, a ...any) error {
	return fmt.Errorf("bpfsyms: %s: %w", fmt.Sprintf(format, a...), ErrMissingInfo)
}
