package printk

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// ErrCorrupt is memory.ErrCorrupt: the log's control data is inconsistent
// (a damaged or crafted dump). Every *FormatError matches it.
var ErrCorrupt = memory.ErrCorrupt

// ErrMissingInfo is vmcoreinfo.ErrMissingInfo: VMCOREINFO does not describe
// the kernel log (a kernel built without CONFIG_PRINTK, or older than 3.5).
var ErrMissingInfo = vmcoreinfo.ErrMissingInfo

// FormatError reports inconsistent log data: What was wrong, at kernel
// virtual address Addr (0 when no single address applies), with the
// offending value Val. It matches ErrCorrupt with errors.Is.
type FormatError struct {
	Addr uint64
	What string
	Val  uint64
}

func (e *FormatError) Error() string {
	s := "printk: "
	if e.Addr != 0 {
		s += fmt.Sprintf("at %#x: ", e.Addr)
	}
	s += e.What
	if e.Val != 0 {
		s += fmt.Sprintf(" (%#x)", e.Val)
	}
	return s
}

// Is reports whether target is ErrCorrupt.
func (e *FormatError) Is(target error) bool { return target == memory.ErrCorrupt }

func formatErr(addr, val uint64, format string, args ...any) *FormatError {
	return &FormatError{Addr: addr, What: fmt.Sprintf(format, args...), Val: val}
}
