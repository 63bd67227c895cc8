package diskdump

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	lzo "github.com/anchore/go-lzo"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

const benchPages = 256 // four times the page cache: every read decodes

func benchDump(b *testing.B, flag uint32) (*Dump, *builder) {
	bl := newBuilder(6)
	bl.maxMapnr = 4096
	for pfn := range uint64(benchPages) {
		bl.pages[pfn*3] = benchContent(pfn)
	}
	bl.codec = func(uint64) uint32 { return flag }
	return openBytes(b, bl.build(b)), bl
}

// benchContent is compressible like kernel data: text-ish and pointer-ish
// runs, distinct per page. The result is the caller's to modify.
func benchContent(pfn uint64) []byte {
	// Made once per pfn: the tests build dumps of the same pages with
	// each codec.
	if p, ok := benchContents.Load(pfn); ok {
		return bytes.Clone(p.([]byte))
	}
	p := makeBenchContent(pfn)
	benchContents.Store(pfn, p)
	return bytes.Clone(p)
}

var benchContents sync.Map // pfn → benchContent's page

func makeBenchContent(pfn uint64) []byte {
	r := rand.New(rand.NewPCG(pfn, 7))
	p := make([]byte, 4096)
	for i := 0; i < len(p); i += 8 {
		switch r.IntN(4) {
		case 0:
			copy(p[i:], "kmalloc-")
		case 1:
			v := 0xffff888000000000 | r.Uint64()&0xffffff8
			for k := range 8 {
				p[i+k] = byte(v >> (8 * k))
			}
		case 2:
			// zeros
		case 3:
			p[i] = byte(r.Uint32())
		}
	}
	return p
}

// BenchmarkReadPages reads every saved page of a dump per codec, through
// the page cache (which they overflow).
func BenchmarkReadPages(b *testing.B) {
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			d, _ := benchDump(b, c.flag)
			buf := make([]byte, 4096)
			b.SetBytes(benchPages * 4096)
			b.ReportAllocs()
			for b.Loop() {
				for pfn := range uint64(benchPages) {
					if _, err := d.ReadAt(buf, pfn*3*4096); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCodec decodes the same stored pages with the bare codec, the
// baseline for BenchmarkReadPages' format overhead.
func BenchmarkCodec(b *testing.B) {
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			d, _ := benchDump(b, c.flag)
			var blobs [][]byte
			var flags []uint32
			for pfn := range uint64(benchPages) {
				f, raw, err := d.RawPage(pfn * 3)
				if err != nil {
					b.Fatal(err)
				}
				blobs, flags = append(blobs, raw), append(flags, f)
			}
			dst := make([]byte, 4096)
			var br bytes.Reader
			var zr io.ReadCloser
			zd, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			b.SetBytes(benchPages * 4096)
			b.ReportAllocs()
			for b.Loop() {
				for i, src := range blobs {
					var err error
					switch flags[i] {
					case 0:
						copy(dst, src)
					case StatusZlib:
						br.Reset(src)
						if zr == nil {
							zr, err = zlib.NewReader(&br)
						} else {
							err = zr.(zlib.Resetter).Reset(&br, nil)
						}
						if err == nil {
							_, err = io.ReadFull(zr, dst)
						}
					case StatusLZO:
						_, err = lzo.Decompress(src, dst)
					case StatusSnappy:
						_, err = snappy.Decode(dst, src)
					case StatusZstd:
						_, err = zd.DecodeAll(src, dst[:0])
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRandomRead8 does 8-byte reads at random addresses of pages that
// are in the cache.
func BenchmarkRandomRead8(b *testing.B) {
	d, _ := benchDump(b, StatusZstd)
	const pages = 48
	addrs := make([]uint64, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range addrs {
		addrs[i] = uint64(r.IntN(pages))*3*4096 + uint64(r.IntN(4096-8))
	}
	var buf [8]byte
	for _, a := range addrs {
		d.ReadAt(buf[:], a)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := d.ReadAt(buf[:], addrs[i%len(addrs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkOpen opens a dump of a 16 GiB machine (4M page frames, a 512 KiB
// bitmap) with 10% of its pages saved (an 11 MiB file), plain and
// flattened: in 64 KiB records, in a record per page out of order (about
// 2,700 records, like QEMU's 16 KiB records of a 44 MiB dump), and in
// 512-byte records (makedumpfile writes some that small). The "-file"
// cases open a temporary file, so each read is a system call.
func BenchmarkOpen(b *testing.B) {
	bl := newBuilder(6)
	bl.maxMapnr = 4 << 20
	bl.vmcoreinfo = bytes.Repeat([]byte("SYMBOL(x)=ffffffff81000000\n"), 100)
	// Saved pages are described by the bitmap only; their content is
	// shared zero pages so the file stays small.
	zero := make([]byte, 4096)
	for pfn := uint64(0); pfn < bl.maxMapnr; pfn += 10 {
		bl.pages[pfn] = zero
	}
	file := bl.build(b)
	perPage := flatten(file, 4096, true, false)
	small := flatten(file, 512, true, false)
	for _, tc := range []struct {
		name   string
		data   []byte
		onDisk bool
	}{
		{"plain", file, false},
		{"flattened", flatten(file, 64<<10, false, false), false},
		{"flattened-page", perPage, false},
		{"plain-file", file, true},
		{"flattened-page-file", perPage, true},
		{"flattened-512-file", small, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := ""
			if tc.onDisk {
				path = filepath.Join(b.TempDir(), "dump")
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if !tc.onDisk {
					if _, err := NewDump(bytes.NewReader(tc.data)); err != nil {
						b.Fatal(err)
					}
					continue
				}
				d, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				d.Close()
			}
		})
	}
}
