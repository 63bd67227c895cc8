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
var ErrCorrupt = memory.Classed("kallsyms: tables do not validate", memory.ErrCorrupt)

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

// CandidatesError reports that none of several candidate layouts
// validated. Its message says how many were tried and shows the nearest
// miss, one line however many there were; Candidates returns every error
// kept, for a verbose report. errors.Is and errors.As see Kind (when set)
// and every candidate's error.
type CandidatesError struct {
	Kind    error  // ErrNotFound for a scan; nil otherwise
	What    string // what was looked for, e.g. "no layout around kallsyms_names 0x… validates"
	Tried   int    // candidates examined; may exceed len(Errs)
	Errs    []error
	Nearest int // index in Errs of the nearest miss
}

func (e *CandidatesError) Error() string {
	switch {
	case len(e.Errs) == 0:
		return "kallsyms: " + e.What
	case e.Tried <= 1:
		return fmt.Sprintf("kallsyms: %s: %v", e.What, e.Errs[0])
	}
	return fmt.Sprintf("kallsyms: %s: %d candidates tried, nearest miss: %v", e.What, e.Tried, e.Errs[e.Nearest])
}

// Unwrap returns Kind and the candidates' errors.
func (e *CandidatesError) Unwrap() []error {
	if e.Kind == nil {
		return e.Errs
	}
	return append([]error{e.Kind}, e.Errs...)
}

// Candidates returns the errors of the candidates kept, in the order they
// were tried.
func (e *CandidatesError) Candidates() []error { return e.Errs }

// candidates builds the CandidatesError of tried candidates whose errors
// are errs. The nearest miss is the first that failed a check of the data
// (a *FormatError, or a nested CandidatesError holding one) rather than a
// read; candidates are tried most likely first.
func candidates(kind error, tried int, errs []error, format string, a ...any) *CandidatesError {
	e := &CandidatesError{Kind: kind, What: fmt.Sprintf(format, a...), Tried: max(tried, len(errs)), Errs: errs}
	for i, err := range errs {
		var fe *FormatError
		if errors.As(err, &fe) {
			e.Nearest = i
			break
		}
	}
	return e
}
