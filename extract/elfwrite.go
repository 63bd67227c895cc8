package extract

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ELFSegment is one PT_LOAD for WriteELF.
type ELFSegment struct {
	Paddr, Vaddr uint64
	// Filesz bytes starting at Paddr are written; from Filesz up to Memsz
	// the segment reads as zeros.
	Filesz, Memsz uint64
	Flags         elf.ProgFlag
}

// ELF describes an ELF core for WriteELF.
type ELF struct {
	ByteOrder binary.ByteOrder // nil means little-endian
	Machine   elf.Machine
	Flags     uint32 // e_flags
	// Notes is the contents of the one PT_NOTE segment, written as is
	// (ELF notes with 4-byte alignment); none when empty.
	Notes    []byte
	Segments []ELFSegment
	// Mem supplies the file bytes of each segment, [Paddr, Paddr+Filesz).
	Mem memory.Reader
}

// ELF64 sizes.
const (
	elfHeaderSize  = 64
	elfPhdrSize    = 56
	elfShdrSize    = 64
	elfPNXNUM      = 0xffff
	elfCopyChunk   = 1 << 20
	elfNoteAlign   = 4
	elfDataAlign   = 8
	elfPFRWX       = elf.PF_R | elf.PF_W | elf.PF_X
	elfMaxSegments = 1<<32 - 2 // sh_info is 32 bits and counts the PT_NOTE
)

// WriteELF writes e as an ELF64 core file to w and returns the number of
// bytes written. The class is always ELF64, whatever the input's was: an
// i386 kernel's memory in an ELF64 container is what QEMU writes too, and
// readers take the pointer size from e_machine. Errors are those of w and
// of reading e.Mem (a *memory.FaultError naming the address).
func WriteELF(w io.Writer, e *ELF) (int64, error) {
	bo := e.ByteOrder
	if bo == nil {
		bo = binary.LittleEndian
	}
	if uint64(len(e.Segments)) > elfMaxSegments {
		return 0, fmt.Errorf("extract: %d segments: too many for ELF", len(e.Segments))
	}
	nph := uint64(len(e.Segments))
	if len(e.Notes) > 0 {
		nph++
	}
	xnum := nph >= elfPNXNUM
	off := uint64(elfHeaderSize) + nph*elfPhdrSize
	var shoff uint64
	if xnum {
		shoff = off
		off += elfShdrSize
	}
	noteOff := off
	off += uint64(len(e.Notes))
	off = (off + elfDataAlign - 1) &^ (elfDataAlign - 1)

	bw := bufio.NewWriterSize(w, 256<<10)
	cw := &countWriter{w: bw}
	var h [elfHeaderSize]byte
	copy(h[:], elf.ELFMAG)
	h[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	if bo == binary.BigEndian {
		h[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	} else {
		h[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	}
	h[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	bo.PutUint16(h[16:], uint16(elf.ET_CORE))
	bo.PutUint16(h[18:], uint16(e.Machine))
	bo.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	bo.PutUint64(h[32:], elfHeaderSize) // e_phoff
	bo.PutUint64(h[40:], shoff)
	bo.PutUint32(h[48:], e.Flags)
	bo.PutUint16(h[52:], elfHeaderSize)
	bo.PutUint16(h[54:], elfPhdrSize)
	if xnum {
		bo.PutUint16(h[56:], elfPNXNUM)
		bo.PutUint16(h[58:], elfShdrSize)
		bo.PutUint16(h[60:], 1) // e_shnum
	} else {
		bo.PutUint16(h[56:], uint16(nph))
	}
	cw.Write(h[:])

	var ph [elfPhdrSize]byte
	phdr := func(typ elf.ProgType, flags elf.ProgFlag, off, vaddr, paddr, filesz, memsz, align uint64) {
		bo.PutUint32(ph[0:], uint32(typ))
		bo.PutUint32(ph[4:], uint32(flags))
		bo.PutUint64(ph[8:], off)
		bo.PutUint64(ph[16:], vaddr)
		bo.PutUint64(ph[24:], paddr)
		bo.PutUint64(ph[32:], filesz)
		bo.PutUint64(ph[40:], memsz)
		bo.PutUint64(ph[48:], align)
		cw.Write(ph[:])
	}
	if len(e.Notes) > 0 {
		phdr(elf.PT_NOTE, 0, noteOff, 0, 0, uint64(len(e.Notes)), uint64(len(e.Notes)), elfNoteAlign)
	}
	dataOff := off
	for _, s := range e.Segments {
		if s.Memsz < s.Filesz {
			return 0, fmt.Errorf("extract: segment at %#x: memsz %#x < filesz %#x", s.Paddr, s.Memsz, s.Filesz)
		}
		flags := s.Flags
		if flags == 0 {
			flags = elfPFRWX
		}
		phdr(elf.PT_LOAD, flags, off, s.Vaddr, s.Paddr, s.Filesz, s.Memsz, 0)
		off += s.Filesz
	}
	if xnum {
		var sh [elfShdrSize]byte
		bo.PutUint32(sh[44:], uint32(nph)) // sh_info
		cw.Write(sh[:])
	}
	cw.Write(e.Notes)
	cw.Write(make([]byte, dataOff-noteOff-uint64(len(e.Notes))))
	if cw.err != nil {
		return cw.n, cw.err
	}
	buf := make([]byte, elfCopyChunk)
	for _, s := range e.Segments {
		for done := uint64(0); done < s.Filesz; {
			n := min(s.Filesz-done, uint64(len(buf)))
			if err := memory.ReadFull(e.Mem, buf[:n], s.Paddr+done); err != nil {
				return cw.n, err
			}
			if _, err := cw.Write(buf[:n]); err != nil {
				return cw.n, err
			}
			done += n
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	if cw.err != nil {
		return cw.n, cw.err
	}
	if uint64(cw.n) != off {
		return cw.n, errors.New("extract: internal error: ELF size mismatch")
	}
	return cw.n, nil
}

// countWriter counts bytes and keeps the first error.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// BuildNotes serializes notes as Linux writes them: 4-byte aligned name and
// descriptor, in byte order bo.
func BuildNotes(bo binary.ByteOrder, notes []Note) []byte {
	var out []byte
	pad := func(n int) int { return (n + 3) &^ 3 }
	for _, n := range notes {
		var hdr [12]byte
		name := n.Name + "\x00"
		bo.PutUint32(hdr[0:], uint32(len(name)))
		bo.PutUint32(hdr[4:], uint32(len(n.Desc)))
		bo.PutUint32(hdr[8:], n.Type)
		out = append(out, hdr[:]...)
		out = append(out, name...)
		out = append(out, make([]byte, pad(len(name))-len(name))...)
		out = append(out, n.Desc...)
		out = append(out, make([]byte, pad(len(n.Desc))-len(n.Desc))...)
	}
	return out
}

// Note is one ELF note for BuildNotes.
type Note struct {
	Name string
	Type uint32
	Desc []byte
}
