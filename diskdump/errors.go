package diskdump

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ErrUnrecognizedFormat means the input is not a kdump-compressed file nor a
// flattened stream holding one. Callers probing several formats move on to
// the next one.
var ErrUnrecognizedFormat = errors.New("diskdump: unrecognized format")

// ErrCorrupt is memory.ErrCorrupt: the dump is damaged, truncated or
// crafted. Every *FormatError matches it with errors.Is.
var ErrCorrupt = memory.ErrCorrupt

// FormatError reports inconsistent data in a dump: What was wrong, at file
// offset Off (-1 when no single offset applies), with the offending value
// Val where there is one. It matches ErrCorrupt (memory.ErrCorrupt) with
// errors.Is.
type FormatError struct {
	Off  int64
	What string
	Val  uint64
}

func (e *FormatError) Error() string {
	s := "diskdump: "
	if e.Off >= 0 {
		s += fmt.Sprintf("at offset %#x: ", e.Off)
	}
	s += e.What
	if e.Val != 0 {
		s += fmt.Sprintf(" (%#x)", e.Val)
	}
	return s
}

// Is reports whether target is ErrCorrupt.
func (e *FormatError) Is(target error) bool { return target == memory.ErrCorrupt }

func formatErr(off int64, val uint64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, What: fmt.Sprintf(format, args...), Val: val}
}

// HeaderError reports a disk_dump_header that no byte order and pointer
// size reads consistently. ByteOrder and PtrSize are those of the likeliest
// reading, whose failure Err is (a *FormatError): a big-endian dump's error
// is about its big-endian reading.
type HeaderError struct {
	ByteOrder binary.ByteOrder
	PtrSize   int
	Err       error
}

func (e *HeaderError) Error() string {
	order := "little-endian"
	if e.ByteOrder == binary.BigEndian {
		order = "big-endian"
	}
	return fmt.Sprintf("diskdump: no consistent header layout (likeliest: %s, %d-byte pointers): %v", order, e.PtrSize, e.Err)
}

// Unwrap returns the likeliest reading's failure.
func (e *HeaderError) Unwrap() error { return e.Err }
