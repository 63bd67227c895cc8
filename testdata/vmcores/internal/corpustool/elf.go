package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

var le = binary.LittleEndian

type phdr struct {
	typ, flags                              uint32
	off, vaddr, paddr, filesz, memsz, align uint64
}

type elfFile struct {
	hdr   []byte // 64 bytes
	phoff uint64
	phnum int
	phdrs []phdr
}

// readELF reads an ELF64 little-endian header and its program headers,
// honouring PN_XNUM (the real count in section header 0's sh_info).
func readELF(f io.ReaderAt) (*elfFile, error) {
	hdr := make([]byte, 64)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return nil, err
	}
	if !bytes.Equal(hdr[:4], []byte("\x7fELF")) || hdr[4] != 2 || hdr[5] != 1 {
		return nil, errors.New("not an ELF64 little-endian file")
	}
	e := &elfFile{hdr: hdr, phoff: le.Uint64(hdr[32:]), phnum: int(le.Uint16(hdr[56:]))}
	if e.phnum == 0xffff {
		sh := make([]byte, 64)
		if _, err := f.ReadAt(sh, int64(le.Uint64(hdr[40:]))); err != nil {
			return nil, fmt.Errorf("section header 0: %w", err)
		}
		e.phnum = int(le.Uint32(sh[44:]))
	}
	if e.phnum > 1<<20 {
		return nil, fmt.Errorf("too many program headers: %d", e.phnum)
	}
	buf := make([]byte, 56*e.phnum)
	if _, err := f.ReadAt(buf, int64(e.phoff)); err != nil {
		return nil, fmt.Errorf("program headers: %w", err)
	}
	for i := range e.phnum {
		b := buf[56*i:]
		e.phdrs = append(e.phdrs, phdr{
			typ: le.Uint32(b), flags: le.Uint32(b[4:]), off: le.Uint64(b[8:]),
			vaddr: le.Uint64(b[16:]), paddr: le.Uint64(b[24:]), filesz: le.Uint64(b[32:]),
			memsz: le.Uint64(b[40:]), align: le.Uint64(b[48:]),
		})
	}
	return e, nil
}

// fixELF copies a QEMU (>= 7.2) ELF dump and rewrites its head so that the
// program headers sit right after the ELF header (e_phoff = 64), the section
// headers are dropped and e_ehsize is 64. Segment and note offsets are
// unchanged: the bytes between the new program headers and the first data
// are zeroed. makedumpfile 1.7.x only reads program headers at offset 64.
func fixELF(in, out string) error {
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	e, err := readELF(src)
	if err != nil {
		return err
	}
	if e.phnum >= 0xffff {
		return fmt.Errorf("%d program headers need PN_XNUM; not supported by fixelf", e.phnum)
	}
	first := uint64(1<<63 - 1)
	for _, p := range e.phdrs {
		if p.filesz > 0 && p.off < first {
			first = p.off
		}
	}
	newEnd := 64 + 56*uint64(e.phnum)
	if newEnd > first {
		return fmt.Errorf("program headers (%d bytes) do not fit before the first segment at %#x", newEnd, first)
	}
	tmp := out + ".tmp"
	dst, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	head := make([]byte, first)
	copy(head, e.hdr)
	le.PutUint64(head[32:], 64) // e_phoff
	le.PutUint64(head[40:], 0)  // e_shoff
	le.PutUint16(head[52:], 64) // e_ehsize
	le.PutUint16(head[58:], 0)  // e_shentsize
	le.PutUint16(head[60:], 0)  // e_shnum
	le.PutUint16(head[62:], 0)  // e_shstrndx
	raw := make([]byte, 56*e.phnum)
	if _, err := src.ReadAt(raw, int64(e.phoff)); err != nil {
		dst.Close()
		return err
	}
	copy(head[64:], raw)
	if _, err := dst.WriteAt(head, 0); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// vmcoreinfoNote returns the descriptor of the first VMCOREINFO note.
func vmcoreinfoNote(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	e, err := readELF(f)
	if err != nil {
		return nil, err
	}
	for _, p := range e.phdrs {
		if p.typ != 4 || p.filesz > 64<<20 {
			continue
		}
		buf := make([]byte, p.filesz)
		if _, err := f.ReadAt(buf, int64(p.off)); err != nil {
			return nil, err
		}
		for len(buf) >= 12 {
			nsz, dsz := uint64(le.Uint32(buf)), uint64(le.Uint32(buf[4:]))
			nEnd := 12 + (nsz+3)&^3
			dEnd := nEnd + (dsz+3)&^3
			if dEnd > uint64(len(buf)) {
				break
			}
			name := string(bytes.TrimRight(buf[12:12+nsz], "\x00"))
			if name == "VMCOREINFO" {
				return buf[nEnd : nEnd+dsz], nil
			}
			buf = buf[dEnd:]
		}
	}
	return nil, errors.New("no VMCOREINFO note")
}
