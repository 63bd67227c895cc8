package memory

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Target describes the machine whose memory a Reader holds, as far as a
// decoder of kernel data needs it: the byte order, the size of a pointer
// (and of the kernel's unsigned long, the same on Linux), and the kernel's
// page size (PAGE_SIZE).
//
// vmcore fills one from the dump (vmcore.Arch embeds it); a kdumpsyms
// Session passes that one value to the translation and to every decoder,
// whose Options take it as their Target field.
//
// # The zero value
//
// A zero field is unknown, never a default: a decoder does not read a
// little-endian 64-bit kernel because nobody said otherwise. A decoder
// that needs a field its Target lacks fails with an error wrapping
// ErrUnknownTarget (see Check), unless its documentation says how it
// finds that field in the dump itself (package kallsyms tries both byte
// orders against the token table, for example).
type Target struct {
	ByteOrder binary.ByteOrder // nil: unknown
	PtrSize   int              // 4 or 8; 0: unknown
	PageSize  int              // a power of two; 0: unknown
}

// Or returns t with each field it leaves unknown taken from d: a caller's
// partial description completed by what the dump says, or by a default.
func (t Target) Or(d Target) Target {
	if t.ByteOrder == nil {
		t.ByteOrder = d.ByteOrder
	}
	if t.PtrSize == 0 {
		t.PtrSize = d.PtrSize
	}
	if t.PageSize == 0 {
		t.PageSize = d.PageSize
	}
	return t
}

// ErrUnknownTarget means a decoder was not told a Target field it needs:
// the dump's architecture is unknown (name it: vmcore.Options.Arch), or a
// caller of the library left Options.Target zero.
var ErrUnknownTarget = errors.New("target machine unknown")

// maxPageSize bounds Check's page size: no kernel page is larger than
// 1 GiB (vmcore ignores a larger PAGESIZE too).
const maxPageSize = 1 << 30

// Check reports whether t can read a word: ByteOrder is set, PtrSize is
// 4 or 8, and PageSize is unknown or a power of two up to 1 GiB. A
// missing field is an error wrapping ErrUnknownTarget, a value no kernel
// has one wrapping errors.ErrUnsupported.
func (t Target) Check() error {
	switch {
	case t.ByteOrder == nil:
		return fmt.Errorf("no byte order: %w", ErrUnknownTarget)
	case t.PtrSize == 0:
		return fmt.Errorf("no pointer size: %w", ErrUnknownTarget)
	case t.PtrSize != 4 && t.PtrSize != 8:
		return fmt.Errorf("pointer size %d: %w", t.PtrSize, errors.ErrUnsupported)
	case t.PageSize != 0 && (t.PageSize < 0 || t.PageSize > maxPageSize || t.PageSize&(t.PageSize-1) != 0):
		return fmt.Errorf("page size %d: %w", t.PageSize, errors.ErrUnsupported)
	}
	return nil
}

// CheckPaged is Check for a decoder that also needs the page size: a zero
// PageSize is an error wrapping ErrUnknownTarget.
func (t Target) CheckPaged() error {
	if err := t.Check(); err != nil {
		return err
	}
	if t.PageSize == 0 {
		return fmt.Errorf("no page size: %w", ErrUnknownTarget)
	}
	return nil
}

// Uint decodes the unsigned integer of len(b) bytes (1, 2, 4 or 8) in the
// target's byte order; other lengths give 0.
func (t Target) Uint(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(t.ByteOrder.Uint16(b))
	case 4:
		return uint64(t.ByteOrder.Uint32(b))
	case 8:
		return t.ByteOrder.Uint64(b)
	}
	return 0
}

// Pointer decodes a pointer (or unsigned long) from the first PtrSize
// bytes of b, which must hold them. t must pass Check.
func (t Target) Pointer(b []byte) uint64 {
	if t.PtrSize == 4 {
		return uint64(t.ByteOrder.Uint32(b))
	}
	return t.ByteOrder.Uint64(b)
}

// ReadPointer reads a pointer (or unsigned long) at addr. A Target that
// does not pass Check is an error, as for every read that fails.
func (t Target) ReadPointer(r Reader, addr uint64) (uint64, error) {
	if err := t.Check(); err != nil {
		return 0, fmt.Errorf("memory: pointer at %#x: %w", addr, err)
	}
	var b [8]byte
	if err := ReadFull(r, b[:t.PtrSize], addr); err != nil {
		return 0, err
	}
	return t.Pointer(b[:]), nil
}
