package elfcore

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

func fuzzSeeds() [][]byte {
	var out [][]byte
	for _, class := range []elf.Class{elf.ELFCLASS32, elf.ELFCLASS64} {
		for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			for _, quirk := range []int{0, 1, 2} {
				b := &elfcoretest.Builder{
					Class: class, ByteOrder: bo, ForceXNUM: quirk == 1, QEMULayout: quirk == 2,
					Notes: []elfcoretest.Note{
						{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusX86_64(bo, 1, 2, 3)},
						elfcoretest.VMCOREINFONote(testInfo),
					},
					Segments: []elfcoretest.Segment{
						{Paddr: 0x1000, Vaddr: 0xffff888000001000, Data: pattern(64, 1), Memsz: 128},
						{Paddr: 0x1040, Vaddr: 0xffffffff81000000, Data: pattern(32, 2)},
					},
				}
				out = append(out, b.Bytes())
			}
		}
	}
	kcore := &elfcoretest.Builder{
		Notes:    []elfcoretest.Note{{Name: "CORE", Type: 4, Desc: []byte{1}}},
		Segments: []elfcoretest.Segment{{Paddr: ^uint64(0), Vaddr: 1 << 63, Data: pattern(16, 3), Memsz: 1 << 40}},
	}
	out = append(out, kcore.Bytes())
	return out
}

// FuzzELFCore checks that NewFile never panics, that an error means a nil
// File, and that every accessor and reader of an opened File works and
// returns errors of the documented kinds.
func FuzzELFCore(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := NewFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if ef != nil {
				t.Fatalf("error %v with non-nil File", err)
			}
			return
		}
		for _, n := range ef.Notes() {
			_ = n.Name
		}
		_ = ef.VMCOREINFO()
		_ = ef.PRStatus()
		if err := ef.NotesErr(); err != nil && !errors.Is(err, memory.ErrCorrupt) {
			t.Fatalf("NotesErr %v does not match ErrCorrupt", err)
		}
		readers := []memory.Reader{ef.Physical()}
		if v, ok := ef.Virtual(); ok {
			readers = append(readers, v)
		}
		buf := make([]byte, 256)
		for i, s := range ef.Segments() {
			if i > 64 {
				break
			}
			for _, r := range readers {
				for _, a := range []uint64{s.Paddr, s.Vaddr, s.Paddr + s.Filesz - 8, s.Vaddr + s.Memsz - 1} {
					n, err := r.ReadAt(buf, a)
					if n > len(buf) || (n < len(buf) && err == nil) {
						t.Fatalf("ReadAt(%#x) = %d, %v", a, n, err)
					}
					if err != nil && !errors.Is(err, memory.ErrNotSaved) && !errors.Is(err, memory.ErrCorrupt) {
						t.Fatalf("ReadAt(%#x): unexpected error kind %v", a, err)
					}
				}
			}
		}
		if err := ef.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
