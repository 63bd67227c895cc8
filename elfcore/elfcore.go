package elfcore

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kdumpsyms/kdumpsyms/internal/safeio"
)

// Segment is one PT_LOAD program header, as written in the file.
type Segment struct {
	Off    int64  // p_offset: where the data starts in the file
	Vaddr  uint64 // p_vaddr
	Paddr  uint64 // p_paddr
	Filesz uint64 // p_filesz: bytes stored in the file
	Memsz  uint64 // p_memsz: bytes of memory; beyond Filesz they read as zeros
	Flags  elf.ProgFlag
	Align  uint64
}

// File is an open ELF core file. Its methods, and the readers it returns,
// are safe for concurrent use, but not concurrently with Close.
type File struct {
	r    io.ReaderAt
	data []byte // the whole file when memory-mapped, else nil
	// file reads what is bulkRead or more of a memory-mapped file (nil
	// when not mapped): the bytes are copied from the page cache without
	// mapping them, so a scan or a large table does not leave its pages
	// mapped, each counted in the process's resident set, for its life.
	file   io.ReaderAt
	size   int64
	closer func() error
	closed bool

	class   elf.Class
	bo      binary.ByteOrder
	machine elf.Machine
	flags   uint32
	segs    []Segment

	noteSegs []Segment
	notes    []Note
	notesErr error
	kcore    bool

	phys *segMap
	virt *segMap
}

// Open opens the ELF core file at path. On platforms that support it the
// file is memory-mapped for reading; Close releases it.
//
// Errors wrap ErrUnrecognizedFormat when the file is not an ELF core and
// are a *FormatError (matching memory.ErrCorrupt) when its headers are
// malformed.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	data, unmap := mmapFile(fh, st.Size())
	var r io.ReaderAt = fh
	if data != nil {
		r = bytes.NewReader(data)
	}
	f, err := newFile(r, st.Size())
	if err != nil {
		if unmap != nil {
			unmap()
		}
		fh.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.data = data
	if data != nil {
		f.file = fh
	}
	f.closer = func() error {
		if unmap != nil {
			unmap()
		}
		return fh.Close()
	}
	return f, nil
}

// NewFile reads an ELF core of size bytes from r. The caller keeps r open
// for as long as the File is used; Close does not close it.
//
// Errors are as for Open.
func NewFile(r io.ReaderAt, size int64) (*File, error) {
	return newFile(r, size)
}

func newFile(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("elfcore: negative size %d", size)
	}
	f := &File{r: r, size: size}
	if err := f.parseHeaders(); err != nil {
		return nil, err
	}
	f.readNotes()
	f.buildMaps()
	return f, nil
}

// Close releases the file if Open opened it. Reads after Close fail with
// os.ErrClosed.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	if f.closer != nil {
		return f.closer()
	}
	return nil
}

// Class returns the ELF class of the container. It need not match the
// kernel's word size: QEMU writes i386 guests as ELF64 (see Machine).
func (f *File) Class() elf.Class { return f.class }

// ByteOrder returns the byte order of the file, which is the target's.
func (f *File) ByteOrder() binary.ByteOrder { return f.bo }

// Machine returns e_machine, which decides the kernel's architecture.
func (f *File) Machine() elf.Machine { return f.machine }

// Flags returns e_flags; see DumpELFIncomplete.
func (f *File) Flags() uint32 { return f.flags }

// Incomplete reports whether makedumpfile marked the dump as cut short.
func (f *File) Incomplete() bool { return f.flags&DumpELFIncomplete != 0 }

// Size returns the size of the file.
func (f *File) Size() int64 { return f.size }

// Segments returns the PT_LOAD program headers in file order. The slice is
// the File's own; do not modify it.
func (f *File) Segments() []Segment { return f.segs }

// parseHeaders reads the ELF header and the program headers.
func (f *File) parseHeaders() error {
	var ident [ehdr64Size]byte
	n, err := f.r.ReadAt(ident[:min(int64(len(ident)), f.size)], 0)
	if n < elf.EI_NIDENT || string(ident[:4]) != elf.ELFMAG {
		if err != nil && err != io.EOF && n < 4 {
			return fmt.Errorf("elfcore: reading header: %w", err)
		}
		return ErrUnrecognizedFormat
	}
	f.class = elf.Class(ident[elf.EI_CLASS])
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		f.bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		f.bo = binary.BigEndian
	default:
		return formatErr(elf.EI_DATA, "unknown ELF data encoding", ident[elf.EI_DATA])
	}
	hsize, phsize, shsize, shInfo := ehdr64Size, phdr64Size, shdr64Size, shInfo64
	switch f.class {
	case elf.ELFCLASS64:
	case elf.ELFCLASS32:
		hsize, phsize, shsize, shInfo = ehdr32Size, phdr32Size, shdr32Size, shInfo32
	default:
		return formatErr(elf.EI_CLASS, "unknown ELF class", ident[elf.EI_CLASS])
	}
	if n < hsize {
		return eofErr(int64(n), "ELF header cut short", f.size)
	}
	bo := f.bo
	h := ident[:hsize]
	if t := elf.Type(bo.Uint16(h[16:])); t != elf.ET_CORE {
		return fmt.Errorf("elfcore: ELF type %v: %w", t, ErrUnrecognizedFormat)
	}
	f.machine = elf.Machine(bo.Uint16(h[18:]))
	var phoff, shoff uint64
	var phentsize, phnum, shentsize, shnum uint16
	if f.class == elf.ELFCLASS64 {
		phoff, shoff = bo.Uint64(h[32:]), bo.Uint64(h[40:])
		f.flags = bo.Uint32(h[48:])
		phentsize, phnum, shentsize, shnum = bo.Uint16(h[54:]), bo.Uint16(h[56:]), bo.Uint16(h[58:]), bo.Uint16(h[60:])
	} else {
		phoff, shoff = uint64(bo.Uint32(h[28:])), uint64(bo.Uint32(h[32:]))
		f.flags = bo.Uint32(h[36:])
		phentsize, phnum, shentsize, shnum = bo.Uint16(h[42:]), bo.Uint16(h[44:]), bo.Uint16(h[46:]), bo.Uint16(h[48:])
	}
	_ = shnum // section 0 exists under PN_XNUM whatever e_shnum says

	count := uint64(phnum)
	if phnum == pnXNUM {
		// The real count is in section header 0's sh_info.
		if shoff == 0 || int(shentsize) < shsize {
			return formatErr(46, "PN_XNUM without a usable section header 0", shentsize)
		}
		if shoff > uint64(f.size) || uint64(f.size)-shoff < uint64(shsize) {
			return eofErr(int64(min(shoff, uint64(f.size))), "section header 0 beyond end of file", f.size)
		}
		var b [4]byte
		if _, err := f.r.ReadAt(b[:], int64(shoff)+int64(shInfo)); err != nil {
			return fmt.Errorf("elfcore: reading section header 0: %w", err)
		}
		count = uint64(bo.Uint32(b[:]))
	}
	if count == 0 {
		return nil
	}
	if int(phentsize) < phsize {
		return formatErr(int64(hsize-10), "program header entry size too small", phentsize)
	}
	if phoff == 0 {
		return formatErr(int64(hsize-32), "program headers at offset 0", phoff)
	}
	// Bound the table by the file size before reading it.
	if phoff > uint64(f.size) || (uint64(f.size)-phoff)/uint64(phentsize) < count {
		return eofErr(int64(min(phoff, uint64(f.size))), fmt.Sprintf("%d program headers of %d bytes beyond end of file", count, phentsize), f.size)
	}
	tab, err := safeio.ReadAt(f.r, count*uint64(phentsize), int64(phoff))
	if err != nil {
		return fmt.Errorf("elfcore: reading program headers at %#x: %w", phoff, err)
	}
	var nload int
	for i := uint64(0); i < count; i++ {
		if elf.ProgType(bo.Uint32(tab[i*uint64(phentsize):])) == elf.PT_LOAD {
			nload++
		}
	}
	f.segs = make([]Segment, 0, nload)
	for i := uint64(0); i < count; i++ {
		p := tab[i*uint64(phentsize):]
		off := int64(phoff + i*uint64(phentsize))
		var typ elf.ProgType
		var s Segment
		var poff uint64
		if f.class == elf.ELFCLASS64 {
			typ = elf.ProgType(bo.Uint32(p[0:]))
			s.Flags = elf.ProgFlag(bo.Uint32(p[4:]))
			poff = bo.Uint64(p[8:])
			s.Vaddr, s.Paddr = bo.Uint64(p[16:]), bo.Uint64(p[24:])
			s.Filesz, s.Memsz, s.Align = bo.Uint64(p[32:]), bo.Uint64(p[40:]), bo.Uint64(p[48:])
		} else {
			typ = elf.ProgType(bo.Uint32(p[0:]))
			poff = uint64(bo.Uint32(p[4:]))
			s.Vaddr, s.Paddr = uint64(bo.Uint32(p[8:])), uint64(bo.Uint32(p[12:]))
			s.Filesz, s.Memsz = uint64(bo.Uint32(p[16:])), uint64(bo.Uint32(p[20:]))
			s.Flags = elf.ProgFlag(bo.Uint32(p[24:]))
			s.Align = uint64(bo.Uint32(p[28:]))
		}
		switch typ {
		case elf.PT_LOAD, elf.PT_NOTE:
		default:
			continue
		}
		if poff > 1<<63-1 || s.Filesz > 1<<63-1-poff {
			return formatErr(off, "segment file range overflows", poff)
		}
		s.Off = int64(poff)
		if typ == elf.PT_NOTE {
			f.noteSegs = append(f.noteSegs, s)
			continue
		}
		if s.Filesz > s.Memsz {
			return formatErr(off, "PT_LOAD p_filesz exceeds p_memsz", s.Filesz)
		}
		f.segs = append(f.segs, s)
	}
	return nil
}

// Notes returns the notes of every PT_NOTE segment, in file order. The
// descriptors share one buffer owned by the File; do not modify them.
func (f *File) Notes() []Note { return f.notes }

// NotesErr returns why the note walk stopped early, or nil. Notes before
// the malformed one are still returned by Notes.
func (f *File) NotesErr() error { return f.notesErr }

// VMCOREINFO returns the descriptor of the first "VMCOREINFO" note, or nil
// when the file has none (QEMU dumps of guests without -device vmcoreinfo,
// /proc/kcore before v4.19).
func (f *File) VMCOREINFO() []byte {
	for _, n := range f.notes {
		if n.Name == "VMCOREINFO" && n.Type == ntVMCOREINFO {
			return n.Desc
		}
	}
	return nil
}

// PRStatus returns the registers of every "CORE" NT_PRSTATUS note the file's
// machine is known for (see ParsePRStatus), in note order: one per CPU in
// kdump and QEMU dumps. Notes that do not decode are skipped.
func (f *File) PRStatus() []PRStatus {
	var out []PRStatus
	for _, n := range f.notes {
		if n.Name != "CORE" || n.Type != ntPRStatus {
			continue
		}
		if ps, err := ParsePRStatus(n.Desc, f.machine, f.bo); err == nil {
			out = append(out, ps)
		}
	}
	return out
}

func (f *File) readNotes() {
	var total uint64
	for _, s := range f.noteSegs {
		total += s.Filesz
		if total > MaxNotesSize {
			f.notesErr = formatErr(s.Off, fmt.Sprintf("notes larger than %d bytes", MaxNotesSize), total)
			return
		}
		if s.Off > f.size || s.Filesz > uint64(f.size-s.Off) {
			f.notesErr = eofErr(s.Off, "PT_NOTE beyond end of file", f.size)
			return
		}
	}
	buf := make([]byte, total)
	pos := 0
	for _, s := range f.noteSegs {
		b := buf[pos : pos+int(s.Filesz)]
		pos += int(s.Filesz)
		if _, err := f.r.ReadAt(b, s.Off); err != nil && err != io.EOF {
			f.notesErr = fmt.Errorf("elfcore: reading notes at %#x: %w", s.Off, err)
			return
		}
		align := 4
		if s.Align == 8 {
			align = 8
		}
		notes, err := parseNotes(b, f.bo, align, s.Off, MaxNotes-len(f.notes))
		if err != nil {
			// Producers disagree on alignment in ELF64; try the other.
			if n2, err2 := parseNotes(b, f.bo, 12-align, s.Off, MaxNotes-len(f.notes)); err2 == nil {
				notes, err = n2, nil
			}
		}
		f.notes = append(f.notes, notes...)
		if err != nil {
			f.notesErr = err
			return
		}
	}
	for _, n := range f.notes {
		if n.Name == "CORE" && n.Type == ntTaskStruct {
			f.kcore = true
		}
	}
}

// readFile reads len(p) bytes of the file at off. Data missing at the end
// of the file is a *FormatError matching io.ErrUnexpectedEOF.
// bulkRead is the size from which a read of a memory-mapped file goes
// through the file instead of the mapping (peak RSS of all on the
// deb13-6.12-amd64 QEMU ELF dump 35.1 -> 26.8 MB at the same speed; of
// info on a 512 MiB riscv64 one, whose VMCOREINFO scan reads it all,
// 530 -> 7.3 MB).
const bulkRead = 64 << 10

func (f *File) readFile(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, os.ErrClosed
	}
	want := len(p)
	if off >= f.size {
		return 0, eofErr(off, "segment data beyond end of file", f.size)
	}
	if int64(want) > f.size-off {
		p = p[:f.size-off]
	}
	var n int
	var err error
	if f.data != nil && (len(p) < bulkRead || f.file == nil) {
		n, err = copyMapped(p, f.data, off)
	} else {
		r := f.r
		if f.file != nil {
			r = f.file
		}
		n, err = r.ReadAt(p, off)
		if err == io.EOF && n == len(p) {
			err = nil
		}
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return n, eofErr(off+int64(n), "segment data beyond end of file", f.size)
		}
		return n, err
	}
	if n < want {
		return n, eofErr(off+int64(n), "segment data beyond end of file", f.size)
	}
	return n, nil
}
