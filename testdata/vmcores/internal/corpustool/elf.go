package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

var le = binary.LittleEndian

type phdr struct {
	typ, flags                              uint32
	off, vaddr, paddr, filesz, memsz, align uint64
}

type elfFile struct {
	hdr   []byte // 64 bytes
	bo    binary.ByteOrder
	is64  bool
	phoff uint64
	phnum int
	phdrs []phdr
}

// readELF reads an ELF header (ELF32 or ELF64, either byte order) and its
// program headers, honouring PN_XNUM (the real count in section header 0's
// sh_info).
func readELF(f io.ReaderAt) (*elfFile, error) {
	hdr := make([]byte, 64)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return nil, err
	}
	if !bytes.Equal(hdr[:4], []byte("\x7fELF")) || (hdr[4] != 1 && hdr[4] != 2) || (hdr[5] != 1 && hdr[5] != 2) {
		return nil, errors.New("not an ELF32/ELF64 file")
	}
	e := &elfFile{hdr: hdr, bo: binary.ByteOrder(binary.LittleEndian), is64: hdr[4] == 2}
	if hdr[5] == 2 {
		e.bo = binary.BigEndian
	}
	bo := e.bo
	var shoff uint64
	phentsize := 56
	if e.is64 {
		e.phoff, shoff, e.phnum = bo.Uint64(hdr[32:]), bo.Uint64(hdr[40:]), int(bo.Uint16(hdr[56:]))
	} else {
		e.phoff, shoff, e.phnum = uint64(bo.Uint32(hdr[28:])), uint64(bo.Uint32(hdr[32:])), int(bo.Uint16(hdr[44:]))
		phentsize = 32
	}
	if e.phnum == 0xffff {
		sh := make([]byte, 64)
		if _, err := f.ReadAt(sh, int64(shoff)); err != nil {
			return nil, fmt.Errorf("section header 0: %w", err)
		}
		if e.is64 {
			e.phnum = int(bo.Uint32(sh[44:]))
		} else {
			e.phnum = int(bo.Uint32(sh[28:]))
		}
	}
	if e.phnum > 1<<20 {
		return nil, fmt.Errorf("too many program headers: %d", e.phnum)
	}
	buf := make([]byte, phentsize*e.phnum)
	if _, err := f.ReadAt(buf, int64(e.phoff)); err != nil {
		return nil, fmt.Errorf("program headers: %w", err)
	}
	for i := range e.phnum {
		b := buf[phentsize*i:]
		if e.is64 {
			e.phdrs = append(e.phdrs, phdr{
				typ: bo.Uint32(b), flags: bo.Uint32(b[4:]), off: bo.Uint64(b[8:]),
				vaddr: bo.Uint64(b[16:]), paddr: bo.Uint64(b[24:]), filesz: bo.Uint64(b[32:]),
				memsz: bo.Uint64(b[40:]), align: bo.Uint64(b[48:]),
			})
			continue
		}
		e.phdrs = append(e.phdrs, phdr{
			typ: bo.Uint32(b), off: uint64(bo.Uint32(b[4:])), vaddr: uint64(bo.Uint32(b[8:])),
			paddr: uint64(bo.Uint32(b[12:])), filesz: uint64(bo.Uint32(b[16:])), memsz: uint64(bo.Uint32(b[20:])),
			flags: bo.Uint32(b[24:]), align: uint64(bo.Uint32(b[28:])),
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
	if !e.is64 || e.bo != binary.ByteOrder(binary.LittleEndian) {
		return errors.New("fixelf: not an ELF64 little-endian file")
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

// vmcoreinfoNote returns the descriptor of the first VMCOREINFO note. When
// the dump has none (QEMU's s390x dumps never do) and sysPath names the
// guest's /sys/kernel/vmcoreinfo ("%pa %x": the note's physical address and
// size, hex), it reads the note from guest memory there instead.
func vmcoreinfoNote(path, sysPath string) ([]byte, error) {
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
		if desc, ok := findNote(buf, e.bo); ok {
			return desc, nil
		}
	}
	if sysPath == "" {
		return nil, errors.New("no VMCOREINFO note")
	}
	var addr, size uint64
	b, err := os.ReadFile(sysPath)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Sscanf(strings.TrimPrefix(string(b), "0x"), "%x %x", &addr, &size); err != nil || size == 0 || size > 1<<20 {
		return nil, fmt.Errorf("no VMCOREINFO note, and %s is not \"addr size\": %q", sysPath, b)
	}
	for _, p := range e.phdrs {
		if p.typ != 1 || addr < p.paddr || addr+size > p.paddr+p.filesz {
			continue
		}
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, int64(p.off+addr-p.paddr)); err != nil {
			return nil, err
		}
		// The note in memory is in the kernel's byte order, which is not
		// always the container's (QEMU 7.2 writes ppc64le dumps big-endian).
		for _, bo := range []binary.ByteOrder{e.bo, other(e.bo)} {
			if desc, ok := findNote(buf, bo); ok {
				return desc, nil
			}
		}
		return nil, fmt.Errorf("no VMCOREINFO note in the dump, nor in memory at %#x", addr)
	}
	return nil, fmt.Errorf("no VMCOREINFO note in the dump, and %#x (+%#x) is in no segment", addr, size)
}

// other returns the byte order that is not bo.
func other(bo binary.ByteOrder) binary.ByteOrder {
	if bo == binary.ByteOrder(binary.BigEndian) {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// findNote returns the descriptor of the first VMCOREINFO note in buf.
func findNote(buf []byte, bo binary.ByteOrder) ([]byte, bool) {
	for len(buf) >= 12 {
		nsz, dsz := uint64(bo.Uint32(buf)), uint64(bo.Uint32(buf[4:]))
		if nsz > 1<<20 || dsz > 1<<30 {
			break
		}
		nEnd := 12 + (nsz+3)&^3
		dEnd := nEnd + (dsz+3)&^3
		if dEnd > uint64(len(buf)) {
			// The note in memory is followed by nothing: its descriptor
			// may end unpadded at the buffer's end.
			if nEnd+dsz <= uint64(len(buf)) && string(bytes.TrimRight(buf[12:12+nsz], "\x00")) == "VMCOREINFO" {
				return buf[nEnd : nEnd+dsz], true
			}
			break
		}
		name := string(bytes.TrimRight(buf[12:12+nsz], "\x00"))
		if name == "VMCOREINFO" {
			return buf[nEnd : nEnd+dsz], true
		}
		buf = buf[dEnd:]
	}
	return nil, false
}
