// Package corrupttest damages copies of real dumps for tests: it finds
// what to overwrite through the library, then writes the copy.
package corrupttest

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
)

// Copy copies the ELF dump src into tb's temporary directory and
// overwrites n bytes at kernel virtual address va with 0xff. It fails the
// test when va is not saved in one of the file's segments.
func Copy(tb testing.TB, src string, va uint64, n int) string {
	tb.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, src)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	tr, err := s.Dump().Translator()
	if err != nil {
		tb.Fatal(err)
	}
	pa, err := tr.Translate(va)
	if err != nil {
		tb.Fatal(err)
	}
	ec := s.Dump().ELFCore()
	if ec == nil {
		tb.Fatalf("corrupttest: %s is not an ELF core", src)
	}
	off := int64(-1)
	for _, sg := range ec.Segments() {
		if pa >= sg.Paddr && pa-sg.Paddr < sg.Filesz {
			off = sg.Off + int64(pa-sg.Paddr)
		}
	}
	if off < 0 {
		tb.Fatalf("corrupttest: %#x (physical %#x) not saved in %s", va, pa, src)
	}
	dst := filepath.Join(tb.TempDir(), "broken-"+filepath.Base(src))
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	junk := make([]byte, n)
	for i := range junk {
		junk[i] = 0xff
	}
	if _, err := out.WriteAt(junk, off); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	return dst
}

// Symbol returns the address of a kernel symbol of the dump at src.
func Symbol(tb testing.TB, src, name string) uint64 {
	tb.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, src)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	sym, err := s.Chain().LookupName(name)
	if err != nil {
		tb.Fatal(err)
	}
	return sym.Addr
}

// Hole copies the ELF64 little-endian dump src into tb's temporary
// directory with the page holding kernel virtual address va left out, as
// a filter would leave it: the PT_LOAD that saved it is split around the
// page (the new program headers are appended to the copy and e_phoff
// points at them), so that reading it is memory.ErrNotSaved. It returns
// the copy's path and the page's physical address.
func Hole(tb testing.TB, src string, va uint64) (string, uint64) {
	tb.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, src)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := s.Dump().Translator()
	if err != nil {
		tb.Fatal(err)
	}
	pa, err := tr.Translate(va)
	s.Close()
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	le := binary.LittleEndian
	if len(raw) < 64 || string(raw[:4]) != "\x7fELF" || raw[4] != 2 || raw[5] != 1 {
		tb.Fatalf("corrupttest: %s is not a little-endian ELF64 file", src)
	}
	phoff, phentsize, phnum := le.Uint64(raw[32:]), uint64(le.Uint16(raw[54:])), uint64(le.Uint16(raw[56:]))
	if phentsize != 56 || phnum == 0xffff || phoff+phnum*56 > uint64(len(raw)) {
		tb.Fatalf("corrupttest: %s: program headers this helper does not rewrite", src)
	}
	page := pa &^ 4095
	var phdrs []byte
	split := false
	for i := uint64(0); i < phnum; i++ {
		ph := raw[phoff+i*56 : phoff+(i+1)*56]
		typ, off, vaddr, paddr, filesz, memsz := le.Uint32(ph), le.Uint64(ph[8:]), le.Uint64(ph[16:]), le.Uint64(ph[24:]), le.Uint64(ph[32:]), le.Uint64(ph[40:])
		if typ != 1 || page < paddr || page+4096 > paddr+filesz || filesz != memsz {
			phdrs = append(phdrs, ph...)
			continue
		}
		for _, part := range [][2]uint64{{paddr, page}, {page + 4096, paddr + filesz}} {
			if part[1] <= part[0] {
				continue
			}
			d := part[0] - paddr
			n := append([]byte(nil), ph...)
			le.PutUint64(n[8:], off+d)
			le.PutUint64(n[16:], vaddr+d)
			le.PutUint64(n[24:], part[0])
			le.PutUint64(n[32:], part[1]-part[0])
			le.PutUint64(n[40:], part[1]-part[0])
			phdrs = append(phdrs, n...)
		}
		split = true
	}
	if !split {
		tb.Fatalf("corrupttest: physical page %#x is not saved whole in one PT_LOAD of %s", page, src)
	}
	le.PutUint64(raw[32:], uint64(len(raw)))
	le.PutUint16(raw[56:], uint16(len(phdrs)/56))
	raw = append(raw, phdrs...)
	dst := filepath.Join(tb.TempDir(), "hole-"+filepath.Base(src))
	if err := os.WriteFile(dst, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	return dst, page
}
