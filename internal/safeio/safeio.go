// Package safeio holds the capped reads and allocation limits every parser
// of kdump-syms uses on untrusted input, after the standard library's
// internal/saferio: a length read from a dump never sizes an allocation
// before the data is shown to exist.
package safeio

import (
	"fmt"
	"io"
)

// ChunkSize is how much ReadAt allocates at a time: a false length hits EOF
// after at most this much memory, instead of allocating it all up front.
const ChunkSize = 10 << 20

// ReadAt reads n bytes at off from r. Memory grows in ChunkSize steps, so a
// lying n costs at most one chunk beyond what r really holds.
func ReadAt(r io.ReaderAt, n uint64, off int64) ([]byte, error) {
	if int64(n) < 0 || int64(n) != int64(int(n)) || off < 0 || off+int64(n) < off {
		return nil, fmt.Errorf("read of %d bytes at offset %#x: %w", n, off, io.ErrUnexpectedEOF)
	}
	if n < ChunkSize {
		buf := make([]byte, n)
		if _, err := r.ReadAt(buf, off); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return buf, nil
	}
	var buf []byte
	chunk := make([]byte, ChunkSize)
	for n > 0 {
		next := min(n, ChunkSize)
		if _, err := r.ReadAt(chunk[:next], off); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf = append(buf, chunk[:next]...)
		off += int64(next)
		n -= next
	}
	return buf, nil
}

// SliceCap returns the capacity to preallocate for a slice of c elements of
// elemSize bytes: c itself when small, otherwise a cap of at most 1 MiB
// worth, so that a lying count grows the slice by appends instead of one
// huge make. It returns -1 when c is negative or c*elemSize overflows.
func SliceCap(c uint64, elemSize uint64) int {
	const maxAlloc = 1 << 20
	if elemSize == 0 {
		elemSize = 1
	}
	if c > (1<<63-1)/elemSize {
		return -1
	}
	if c*elemSize > maxAlloc {
		return int(maxAlloc / elemSize)
	}
	return int(c)
}
