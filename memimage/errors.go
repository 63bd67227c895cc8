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

// ErrOverlap means two ranges of an image cover the same address. The
// *FormatError names the later of the two in file order (Range, Start,
// Last); its message names the other.
var ErrOverlap = errors.New("memimage: ranges overlap")

// ErrBadBlock means an AVML range's compressed block does not decode: its
// snappy framing, a chunk's length, contents or checksum, or the block's
// trailer is wrong. NewFile finds what indexing the block shows; a chunk
// that does not decompress, or whose data fails its checksum, fails the
// reads that need it, and only those.
var ErrBadBlock = errors.New("memimage: bad AVML block")

// ErrBadLayout means a raw image's layout is wrong whatever the file
// holds: no range, a range of size 0 ("the rest of the file") before the
// last, a range past the end of the address space, or two ranges that
// overlap. The caller's layout is at fault, not the file: such an error
// does not match memory.ErrCorrupt. ParseRawLayout reports the same
// mistakes when it parses a layout.
var ErrBadLayout = errors.New("memimage: impossible raw layout")

// FormatError reports malformed input: What was wrong at file offset Off,
// in range Range (its index in file order, -1 when the error concerns no
// single range) covering [Start, Last]. A raw layout's range that has no
// last byte (the rest of a file with nothing left, a size 0 before the last
// range, an end past the end of the address space) has Start set and Last
// 0; its message says "range N at START".
type FormatError struct {
	Off         int64
	Range       int
	Start, Last uint64
	What        string
	eof         bool
	kind        error // ErrOverlap, ErrBadBlock or nil
	layout      bool  // a raw layout's mistake: ErrBadLayout, not corrupt
	noLast      bool  // the range has no last byte: Last is 0
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("memimage: at offset %#x: ", e.Off)
	switch {
	case e.Range >= 0 && e.noLast:
		s += fmt.Sprintf("range %d at %#x: ", e.Range, e.Start)
	case e.Range >= 0:
		s += fmt.Sprintf("range %d [%#x-%#x]: ", e.Range, e.Start, e.Last)
	}
	return s + e.What
}

// Is reports whether target is memory.ErrCorrupt (every error but a raw
// layout's mistakes, which match ErrBadLayout instead), io.ErrUnexpectedEOF
// when the file ends before what the header or layout promises, ErrOverlap
// for overlapping ranges, or ErrBadBlock for an AVML block that does not
// decode.
func (e *FormatError) Is(target error) bool {
	switch target {
	case memory.ErrCorrupt:
		return !e.layout
	case ErrBadLayout:
		return e.layout
	case io.ErrUnexpectedEOF:
		return e.eof
	}
	return e.kind != nil && target == e.kind
}

func rangeErr(off int64, i int, start, last uint64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Range: i, Start: start, Last: last, What: fmt.Sprintf(format, args...)}
}

// startErr is rangeErr for range i at start, which has no last byte.
func startErr(off int64, i int, start uint64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Range: i, Start: start, noLast: true, What: fmt.Sprintf(format, args...)}
}

func fileErr(off int64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Range: -1, What: fmt.Sprintf(format, args...)}
}
