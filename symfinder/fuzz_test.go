package symfinder

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// checkFile asserts the fuzz contract: an error means a nil result, and a
// result answers every kind of query without panicking.
func checkFile(t *testing.T, f *SymbolFile, err error) {
	if err != nil {
		if f != nil {
			t.Fatalf("error %v with a non-nil result", err)
		}
		return
	}
	n := 0
	_ = f.Find(Query{Kind: All}, func(s Symbol) bool {
		n++
		_ = f.Find(Query{Kind: ByAddr, Addr: s.Addr}, func(Symbol) bool { return true })
		_ = f.Find(Query{Kind: ByName, Name: s.Name}, func(Symbol) bool { return true })
		return true
	})
	if n != f.Len() {
		t.Fatalf("All yielded %d symbols, Len says %d", n, f.Len())
	}
}

func seedFile(f *testing.F, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
}

func FuzzParseKallsyms(f *testing.F) {
	seedFile(f, "testdata/kallsyms.txt")
	f.Add([]byte("ffffffff81000000 T _text\n"))
	f.Add([]byte("c1000000 T _text\nc1000010 t a\t[m]\r\n\n"))
	f.Add([]byte("0000000000000000 T a\n0000000000000000 T b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := ParseKallsyms(bytes.NewReader(data), "fuzz")
		checkFile(t, sf, err)
	})
}

func FuzzParseSystemMap(f *testing.F) {
	seedFile(f, "testdata/System.map")
	f.Add([]byte("ffffffff81000000 T _text\n"))
	f.Add([]byte("                 U printk\nc1000000 T _stext\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, slide := range []uint64{0, 0x2c000000, ^uint64(0)} {
			sf, err := ParseSystemMap(bytes.NewReader(data), "fuzz", slide)
			checkFile(t, sf, err)
		}
	})
}

// FuzzNewELFSymbols feeds hostile ELF files to NewELFSymbols. The input
// edits a well-formed vmlinux-like ELF (testutil.FuzzPatch; mode's low
// bit picks the big-endian one), or with fuzzRawELF in mode is the file:
// edits keep inputs to a few bytes, so the fuzzer minimizes each new input
// in moments instead of spending -fuzzminimizetime on a 1.7 KiB file.
func FuzzNewELFSymbols(f *testing.F) {
	const (
		fuzzRawELF   = 0x80
		fuzzMaxEdits = 128
		fuzzMaxRaw   = 512
	)
	bases := [][]byte{buildELF64(f, binary.LittleEndian), buildELF64(f, binary.BigEndian)}
	f.Add(uint8(0), []byte(nil))
	f.Add(uint8(1), []byte(nil))
	// e_shnum, and a symbol's st_name.
	f.Add(uint8(0), []byte{0, 0, 0, 60, 2, 0xff, 0xff})
	f.Add(uint8(1), []byte{0, 0, 0, 88, 4, 0x7f, 0xff, 0xff, 0xff})
	// Raw seeds stay small: a raw input is minimized byte by byte.
	f.Add(uint8(fuzzRawELF), bases[0][:64])
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		file := data[:min(len(data), fuzzMaxRaw)]
		if mode&fuzzRawELF == 0 {
			file = testutil.FuzzPatch(bases[mode&1], data[:min(len(data), fuzzMaxEdits)])
		}
		ix, err := NewELFSymbols(bytes.NewReader(file), "fuzz", 0x1000)
		if err != nil {
			if ix != nil {
				t.Fatalf("error %v with a non-nil result", err)
			}
			return
		}
		_ = ix.Find(Query{Kind: All}, func(s Symbol) bool {
			_, _ = ix.Lookup(s.Addr)
			return true
		})
	})
}
