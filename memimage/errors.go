package memimage

import (
	"errors"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ErrUnrecognizedFormat means the file starts with neither a LiME nor an
// AVML range header. Callers probing several formats move on to the next.
var ErrUnrecognizedFormat = errors.New("memimage: not a LiME or AVML image")

// FormatError reports malformed input: What was wrong at file offset Off,
// in range Range (its index in file order, -1 when the error concerns no
// single range) covering [Start, Last].
type FormatError struct {
	Off         int64
	Range       int
	Start, Last uint64
	What        string
	eof         bool
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("memimage: at offset %#x: ", e.Off)
	if e.Range >= 0 {
		s += fmt.Sprintf("range %d [%#x-%#x]: ", e.Range, e.Start, e.Last)
	}
	return s + e.What
}

// Is reports whether target is memory.ErrCorrupt, or io.ErrUnexpectedEOF
// when the file ends before what the header promises.
func (e *FormatError) Is(target error) bool {
	return target == memory.ErrCorrupt || (e.eof && target == io.ErrUnexpectedEOF)
}

func rangeErr(off int64, i int, start, last uint64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Range: i, Start: start, Last: last, What: fmt.Sprintf(format, args...)}
}

func fileErr(off int64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Range: -1, What: fmt.Sprintf(format, args...)}
}
