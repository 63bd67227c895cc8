package extract

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// FuzzWriteRoundTrip writes a kdump (plain, flattened or split) and an ELF
// holding a page set chosen by the input, and checks that the readers give
// back every page, and no other.
func FuzzWriteRoundTrip(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 200, 201}, uint8(0))
	f.Add([]byte{7, 7, 9, 255}, uint8(1))
	f.Add([]byte{1, 30, 31, 60}, uint8(2))
	f.Fuzz(func(t *testing.T, sel []byte, mode uint8) {
		const bs = 1024
		var pfns []uint64
		for _, b := range sel {
			pfns = append(pfns, uint64(b))
		}
		slices.Sort(pfns)
		pfns = slices.Compact(pfns)
		page := func(pfn uint64) []byte {
			b := bytes.Repeat([]byte{byte(pfn), byte(pfn >> 3)}, bs/2)
			if pfn%5 == 0 {
				b = make([]byte, bs) // shared zero pages
			}
			return b
		}
		k := &Kdump{
			Header: diskdump.Header{Version: 6, Utsname: diskdump.Utsname{Machine: "x86_64"}, BlockSize: bs, MaxMapnr: 256,
				ByteOrder: binary.LittleEndian, PtrSize: 8},
			VMCOREINFO: []byte(testInfo),
			Pages:      pfns,
			Page:       func(pfn uint64) (uint32, []byte, error) { return 0, page(pfn), nil },
		}
		var parts []*bufWriterAt
		var ws []io.WriterAt
		var flat bytes.Buffer
		var fw *FlatWriter
		switch mode % 3 {
		case 0:
			parts = []*bufWriterAt{{}}
			ws = []io.WriterAt{parts[0]}
		case 1:
			fw = NewFlatWriter(&flat)
			ws = []io.WriterAt{fw}
		case 2:
			k.Parts = []PFNRange{{0, 100}, {100, 256}}
			parts = []*bufWriterAt{{}, {}}
			ws = []io.WriterAt{parts[0], parts[1]}
		}
		if err := WriteKdump(ws, k); err != nil {
			t.Fatal(err)
		}
		var rs []io.ReaderAt
		if fw != nil {
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, bytes.NewReader(flat.Bytes()))
		}
		for _, p := range parts {
			rs = append(rs, bytes.NewReader(p.b))
		}
		d, err := diskdump.NewDump(rs...)
		if err != nil {
			t.Fatal(err)
		}
		check := func(r memory.Reader) {
			got := make([]byte, bs)
			for pfn := range uint64(256) {
				_, err := r.ReadAt(got, pfn*bs)
				if _, saved := slices.BinarySearch(pfns, pfn); saved {
					if err != nil || !bytes.Equal(got, page(pfn)) {
						t.Fatalf("pfn %d: %v", pfn, err)
					}
				} else if err == nil {
					t.Fatalf("pfn %d: read, but not saved", pfn)
				}
			}
		}
		check(d)
		var eb bytes.Buffer
		if _, err := WriteELF(&eb, &ELF{Notes: BuildNotes(binary.LittleEndian, []Note{{Name: "VMCOREINFO", Desc: []byte(testInfo)}}), Segments: runs(pfns, 10), Mem: d}); err != nil {
			t.Fatal(err)
		}
		ef, err := elfcore.NewFile(bytes.NewReader(eb.Bytes()), int64(eb.Len()))
		if err != nil {
			t.Fatal(err)
		}
		check(ef.Physical())
	})
}
