package elfcore

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
)

// BenchmarkRead8 reads 8 bytes at random physical addresses of a 64 MiB
// core opened from a file, spread over 256 segments.
func BenchmarkRead8(b *testing.B) {
	const nseg, segSize = 256, 256 << 10
	segs := make([]elfcoretest.Segment, nseg)
	for i := range segs {
		segs[i] = elfcoretest.Segment{Paddr: uint64(i) * 2 * segSize, Data: make([]byte, segSize)}
	}
	path := filepath.Join(b.TempDir(), "vmcore")
	if err := os.WriteFile(path, (&elfcoretest.Builder{Segments: segs}).Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r := f.Physical()
	addrs := make([]uint64, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range addrs {
		addrs[i] = uint64(rng.IntN(nseg))*2*segSize + uint64(rng.IntN(segSize-8))
	}
	var buf [8]byte
	b.ReportAllocs()
	b.SetBytes(8)
	i := 0
	for b.Loop() {
		if _, err := r.ReadAt(buf[:], addrs[i%len(addrs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
