package memimage

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// RawRange is one physical range of a raw image's layout: Size bytes from
// physical address Start. A Size of 0 means "to the end of the file" and
// is allowed only for the last range.
type RawRange struct{ Start, Size uint64 }

// NewRaw maps the raw image of size bytes in r: the ranges of layout are
// stored one after the other from offset 0, in the order given. Bytes after
// the last range are ignored. Errors are a *FormatError naming the range:
// for an impossible layout (see ErrBadLayout; overlapping ranges match
// ErrOverlap too), and, matching memory.ErrCorrupt and
// io.ErrUnexpectedEOF, for a file shorter than the layout needs.
func NewRaw(r io.ReaderAt, size int64, layout []RawRange) (*File, error) {
	if err := checkRawLayout(layout); err != nil {
		return nil, err
	}
	f := &File{r: r, size: size, format: Raw}
	var order []Range
	offs := make([]int64, 0, len(layout))
	off := int64(0)
	for i, l := range layout {
		n := l.Size
		left := uint64(size - off)
		if n == 0 {
			if left == 0 {
				e := startErr(off, i, l.Start, "no bytes left in the file for the rest of it")
				e.eof = true
				return nil, e
			}
			n = left
		}
		last := l.Start + n - 1
		if last < l.Start {
			e := startErr(off, i, l.Start, "%#x bytes (the rest of the file) run past the end of the address space", n)
			e.layout = true
			return nil, e
		}
		if n > left {
			e := rangeErr(off, i, l.Start, last, "raw image too short: the range needs file bytes up to %#x, the file has %#x", uint64(off)+n, size)
			e.eof = true
			return nil, e
		}
		order = append(order, Range{l.Start, last})
		offs = append(offs, off)
		f.pieces = append(f.pieces, piece{start: l.Start, last: last, off: off, rng: int32(i)})
		off += int64(n)
	}
	if err := checkOverlaps(order, func(i int) int64 { return offs[i] }); err != nil {
		err.(*FormatError).layout = true
		return nil, err
	}
	f.finish(order)
	return f, nil
}

// checkRawLayout finds the mistakes of a raw layout that no file can make
// right (ErrBadLayout): no range, a range of size 0 before the last, a
// range past the end of the address space, two sized ranges that overlap.
// Offsets in its errors are where the range would start in the file.
func checkRawLayout(layout []RawRange) error {
	if len(layout) == 0 {
		e := fileErr(0, "raw image: no range given")
		e.layout = true
		return e
	}
	var order []Range
	var offs []int64
	off := uint64(0)
	for i, l := range layout {
		if l.Size == 0 {
			if i != len(layout)-1 {
				e := startErr(int64(off), i, l.Start, "only the last range may take the rest of the file (size 0)")
				e.layout = true
				return e
			}
			break
		}
		last := l.Start + l.Size - 1
		if last < l.Start {
			e := startErr(int64(off), i, l.Start, "%#x bytes run past the end of the address space", l.Size)
			e.layout = true
			return e
		}
		order = append(order, Range{l.Start, last})
		offs = append(offs, int64(off))
		off += l.Size
	}
	if err := checkOverlaps(order, func(i int) int64 { return offs[i] }); err != nil {
		err.(*FormatError).layout = true
		return err
	}
	return nil
}

// ParseRawLayout parses a raw image layout as the command line takes it:
// comma-separated ranges BASE[:SIZE], numbers in C syntax (0x for hex) with
// an optional K, M, G or T suffix (powers of 1024) on sizes. "0x0" maps the
// whole file at physical 0; "0:3G,0x100000000" maps the first 3 GiB of the
// file at 0 and the rest at 4 GiB. A layout no file can make right is an
// error matching ErrBadLayout (see NewRaw).
func ParseRawLayout(s string) ([]RawRange, error) {
	var out []RawRange
	for part := range strings.SplitSeq(s, ",") {
		base, size, hasSize := strings.Cut(strings.TrimSpace(part), ":")
		start, err := strconv.ParseUint(base, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("raw layout %q: base %q: not a number", s, base)
		}
		r := RawRange{Start: start}
		if hasSize {
			if r.Size, err = parseSize(size); err != nil || r.Size == 0 {
				return nil, fmt.Errorf("raw layout %q: size %q: not a positive number", s, size)
			}
		}
		out = append(out, r)
	}
	if err := checkRawLayout(out); err != nil {
		return nil, fmt.Errorf("raw layout %q: %w", s, err)
	}
	return out, nil
}

func parseSize(s string) (uint64, error) {
	shift := 0
	if s != "" {
		switch s[len(s)-1] {
		case 'K', 'k':
			shift = 10
		case 'M', 'm':
			shift = 20
		case 'G', 'g':
			shift = 30
		case 'T', 't':
			shift = 40
		}
		if shift != 0 {
			s = s[:len(s)-1]
		}
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, err
	}
	if v<<shift>>shift != v {
		return 0, strconv.ErrRange
	}
	return v << shift, nil
}
