package elfcore

import (
	"errors"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ErrUnrecognizedFormat means the input is not an ELF core file: no ELF
// magic, or an ELF file of another type (an executable such as vmlinux).
var ErrUnrecognizedFormat = errors.New("elfcore: not an ELF core file")

// FormatError reports malformed input: What happened at file offset Off,
// with the offending value Val (nil when there is none). It matches
// memory.ErrCorrupt with errors.Is; when the cause is data missing from the
// end of the file it also matches io.ErrUnexpectedEOF.
type FormatError struct {
	Off  int64
	What string
	Val  any
	eof  bool
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("elfcore: at offset %#x: %s", e.Off, e.What)
	switch v := e.Val.(type) {
	case nil:
	case string:
		s += fmt.Sprintf(" (%q)", v)
	case int, int64, uint64, uint32, uint16, uint8:
		s += fmt.Sprintf(" (%#x)", v)
	default:
		s += fmt.Sprintf(" (%v)", v)
	}
	return s
}

// Is reports whether target is memory.ErrCorrupt, or io.ErrUnexpectedEOF
// for data cut off by the end of the file.
func (e *FormatError) Is(target error) bool {
	return target == memory.ErrCorrupt || (e.eof && target == io.ErrUnexpectedEOF)
}

func formatErr(off int64, what string, val any) *FormatError {
	return &FormatError{Off: off, What: what, Val: val}
}

func eofErr(off int64, what string, size int64) *FormatError {
	return &FormatError{Off: off, What: what, Val: size, eof: true}
}
