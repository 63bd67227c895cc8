// Package nozero allocates slices whose memory is not zeroed first, for
// decoders that write every element before anything reads it.
//
// make zeroes what it allocates. For a multi-megabyte array that one
// goroutine allocates and several fill, that zeroing is a serial pass that
// also takes every page fault of the array, before the parallel work can
// start (measured on kallsyms expansion). The runtime has a non-zeroing
// allocator for exactly this, used by strings.Builder.Grow; Bytes reaches
// it through strings.Builder.
//
// A slice returned here has length 0: only elements appended, or written
// after reslicing, may be read. The element types hold no pointers, so
// stale bytes are never taken for pointers by the garbage collector.
package nozero

import (
	"strings"
	"unsafe"
)

// Bytes returns a slice of length 0 and capacity n (nil for n <= 0).
func Bytes(n int) []byte {
	if n <= 0 {
		return nil
	}
	var sb strings.Builder
	sb.Grow(n) // one allocation of n bytes, not zeroed
	sb.WriteByte(0)
	s := sb.String()
	return unsafe.Slice(unsafe.StringData(s), n)[:0]
}

// Uint32s returns a slice of length 0 and capacity n (nil for n <= 0).
func Uint32s(n int) []uint32 {
	if n <= 0 || n > maxInt/4 {
		return make([]uint32, 0, max(n, 0)) // make reports an impossible size
	}
	b := Bytes(4 * n)
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b[:1]))), n)[:0]
}

const maxInt = int(^uint(0) >> 1)
