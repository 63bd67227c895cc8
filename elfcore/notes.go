package elfcore

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Note is one ELF note.
type Note struct {
	Name string // the name without its terminating NUL: "CORE", "VMCOREINFO", "QEMU", ...
	Type uint32
	Desc []byte
}

// ParseNotes parses a buffer of ELF notes in byte order bo with name and
// descriptor padded to align bytes (4 for Linux notes, even in ELF64; 8 is
// accepted too). The returned descriptors alias data. A header of three
// zero words ends the walk, as does the end of data: the kernel pads note
// buffers with zeros.
//
// It is meant for note blobs outside an ELF file, such as the one a
// kdump-compressed file copies after its sub-header. On malformed input it
// returns the notes before the bad one together with a *FormatError (Off
// relative to data), matching memory.ErrCorrupt.
func ParseNotes(data []byte, bo binary.ByteOrder, align int) ([]Note, error) {
	if align != 4 && align != 8 {
		return nil, fmt.Errorf("elfcore: note alignment %d: must be 4 or 8", align)
	}
	return parseNotes(data, bo, align, 0, MaxNotes)
}

// parseNotes is ParseNotes reporting offsets relative to base and keeping at
// most limit notes.
func parseNotes(data []byte, bo binary.ByteOrder, align int, base int64, limit int) ([]Note, error) {
	var notes []Note
	a := uint64(align)
	for pos := uint64(0); pos < uint64(len(data)); {
		off := base + int64(pos)
		rest := uint64(len(data)) - pos
		if rest < noteHeaderSize {
			if allZero(data[pos:]) {
				break
			}
			return notes, formatErr(off, "note header cut short", rest)
		}
		h := data[pos:]
		namesz, descsz, typ := uint64(bo.Uint32(h)), uint64(bo.Uint32(h[4:])), bo.Uint32(h[8:])
		if namesz == 0 && descsz == 0 && typ == 0 {
			break // zero padding after the last note
		}
		nameEnd := noteHeaderSize + namesz // both fit in 33 bits: no overflow
		descOff := alignUp(nameEnd, a)
		descEnd := descOff + descsz
		if descOff > rest || descsz > rest-descOff {
			return notes, formatErr(off, fmt.Sprintf("note of name size %d and descriptor size %d beyond end of notes", namesz, descsz), rest)
		}
		if len(notes) >= limit {
			return notes, formatErr(off, fmt.Sprintf("more than %d notes", MaxNotes), len(notes))
		}
		name := h[noteHeaderSize:nameEnd]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		notes = append(notes, Note{Name: string(name), Type: typ, Desc: h[descOff:descEnd:descEnd]})
		next := alignUp(descEnd, a)
		if next > rest {
			next = rest // the last note's padding may be missing
		}
		pos += next
	}
	return notes, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
