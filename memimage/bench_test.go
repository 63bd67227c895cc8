package memimage

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// benchImage is 4 MiB of text-like memory as a LiME or AVML image.
func benchImage(b *testing.B, format Format) *File {
	m := testutil.NewSparseMemory()
	line := []byte("ffffffff81000000 T kmalloc_trace_noprof\n")
	m.Write(0x100000, bytes.Repeat(line, (4<<20)/len(line)+1)[:4<<20])
	rs := []testutil.PhysRange{{Start: 0x100000, Last: 0x4fffff}}
	img := lime(b, m, rs, binary.LittleEndian)
	if format == AVML {
		img = avml(b, m, rs)
	}
	f, err := NewFile(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkPageRead reads 4 KiB pages in a stride that defeats AVML's
// chunk cache (every read decompresses a 64 KiB chunk) and one that hits
// it.
func BenchmarkPageRead(b *testing.B) {
	for _, format := range []Format{LiME, AVML} {
		for _, stride := range []uint64{4096, 65536 * 9} {
			name := string(format) + "/sequential"
			if stride != 4096 {
				name = string(format) + "/uncached"
			}
			b.Run(name, func(b *testing.B) {
				f := benchImage(b, format)
				page := make([]byte, 4096)
				phys := f.Physical()
				b.ReportAllocs()
				b.SetBytes(4096)
				var off uint64
				for b.Loop() {
					if err := memory.ReadFull(phys, page, 0x100000+off); err != nil {
						b.Fatal(err)
					}
					off = (off + stride) % (4 << 20) &^ 4095
				}
			})
		}
	}
}
