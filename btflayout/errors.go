package btflayout

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

var (
	// ErrNotFound means the source has no struct, field or enum of the name
	// asked for. The source is fine; it describes a kernel without it.
	ErrNotFound = memory.Classed("not found in layout source", vmcoreinfo.ErrMissingInfo)

	// ErrNoBTF means the dump carries no vmlinux BTF: the kernel was built
	// without CONFIG_DEBUG_INFO_BTF, or the __start_BTF/__stop_BTF symbols
	// are unknown. Supply a vmlinux with debug info, a BTF file, or a layout
	// table instead.
	ErrNoBTF = memory.WithRemedy(memory.Classed("no vmlinux BTF in the dump", vmcoreinfo.ErrMissingInfo), memory.SupplyLayouts)

	// ErrCorrupt means the BTF blob, DWARF or table is malformed: typically
	// this indicates damaged or crafted input.
	ErrCorrupt = memory.Classed("corrupt type information", memory.ErrCorrupt)
)

// InferError reports why Infer (or a scan for the module list) found no
// layout: what it found in the dump is no kernel's struct module list.
// It matches ErrCorrupt.
type InferError struct {
	Problem InferProblem
	Addr    uint64 // where: the list node or struct module (0: none in particular)
	Msg     string // what, and the values seen
}

// InferProblem says what kind of evidence an InferError stopped at.
type InferProblem int

const (
	InferOther InferProblem = iota
	ListBroken              // a list node's prev does not point back
	Randomized              // a struct module's fields are not where any layout has them (randstruct?)
	Ambiguous               // several offsets fit a member equally
)

func (e *InferError) Error() string {
	return fmt.Sprintf("btflayout: inferring layouts: %s: %v", e.Msg, ErrCorrupt)
}

// Is reports whether target is ErrCorrupt or memory.ErrCorrupt.
func (e *InferError) Is(target error) bool {
	return target == ErrCorrupt || errors.Is(ErrCorrupt, target)
}

// LineError reports a malformed line of a layout table.
type LineError struct {
	File string // the name the caller gave the table
	Num  int    // 1-based line number
	Err  error  // what is wrong, wrapping ErrCorrupt
}

func (e *LineError) Error() string {
	return fmt.Sprintf("btflayout: %s: line %d: %v", e.File, e.Num, e.Err)
}

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }
