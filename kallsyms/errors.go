package kallsyms

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// ErrCorrupt means the tables do not validate: typically this indicates a
// damaged dump, a wrong address override, or a kernel layout this package
// does not know. Errors wrapping it are *FormatError values and also match
// memory.ErrCorrupt.
var ErrCorrupt = errors.New("kallsyms: tables do not validate")

// ErrMissingInfo means VMCOREINFO (or Options) lacks what locating the
// tables needs. It matches vmcoreinfo.ErrMissingInfo too.
var ErrMissingInfo = fmt.Errorf("kallsyms: %w", vmcoreinfo.ErrMissingInfo)

// ErrNotFound means a scan of the kernel image found no table that
// validated. Errors wrapping it also wrap ErrCorrupt when a candidate was
// seen and rejected; the message then says which check failed.
var ErrNotFound = errors.New("kallsyms: tables not found")

// FormatError reports a failed check: What failed, at address Addr, with
// the offending value Val.
type FormatError struct {
	Addr uint64
	What string
	Val  uint64
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("kallsyms: at %#x: %s (value %#x)", e.Addr, e.What, e.Val)
}

// Is makes errors.Is(err, ErrCorrupt) and errors.Is(err,
// memory.ErrCorrupt) true.
func (e *FormatError) Is(target error) bool {
	return target == ErrCorrupt || target == memory.ErrCorrupt
}

func corrupt(addr uint64, val uint64, format string, args ...any) error {
	return &FormatError{Addr: addr, What: fmt.Sprintf(format, args...), Val: val}
}
