// Package corrupttest damages copies of real dumps for tests: it finds
// what to overwrite through the library, then writes the copy.
package corrupttest

import (
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
