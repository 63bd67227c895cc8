package diskdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// fuzzSeeds are small valid dumps of several shapes.
func fuzzSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for i, c := range codecs {
		b := newBuilder(6).fill(0, 1, 3, 64, 100)
		b.maxMapnr = 128
		b.codec = func(uint64) uint32 { return c.flag }
		b.vmcoreinfo = []byte("PAGESIZE=4096\n")
		b.bs = 1024
		if i%2 == 1 {
			b.bo = binary.BigEndian
		}
		if i == 3 {
			b.layout, b.sub, b.machine = &layout32, &sub32pack, "i686"
		}
		if i == 4 {
			b.status = StatusIncomplete
		}
		out = append(out, b.build(t))
	}
	sb := newBuilder(6).fill(1, 2)
	sb.bs, sb.maxMapnr = 1024, 64
	sb.split, sb.start, sb.end = true, 0, 2
	out = append(out, sb.build(t))
	out = append(out, flatten(out[1], 700, true, true))
	return out
}

// Fuzz inputs are edits to a seed (testutil.FuzzPatch) picked by the mode
// byte, or with fuzzRaw in it the file itself. The seeds are 8–25 KiB:
// taken whole, every input that adds coverage stalled fuzzing for the
// whole -fuzzminimizetime while the fuzzer tried cuts of it (FuzzOpen ran
// at about 1,000 execs/s). Bytes past a cap are ignored, so the minimizer
// cuts them first.
const (
	fuzzRaw      = 0x80
	fuzzMaxEdits = 128
	fuzzMaxRaw   = 1 << 10
)

// fuzzInput is the file a fuzz input stands for.
func fuzzInput(bases [][]byte, mode uint8, data []byte) []byte {
	if mode&fuzzRaw != 0 {
		return data[:min(len(data), fuzzMaxRaw)]
	}
	return testutil.FuzzPatch(bases[int(mode&^fuzzRaw)%len(bases)], data[:min(len(data), fuzzMaxEdits)])
}

// fuzzAdd adds a seed per base, one with a few edits in the header, and a
// small raw one.
func fuzzAdd(f *testing.F, bases [][]byte) {
	for i := range bases {
		f.Add(uint8(i), []byte(nil))
	}
	f.Add(uint8(0), []byte{0, 0, 0, 8, 4, 0xff, 0xff, 0xff, 0x7f})
	f.Add(uint8(fuzzRaw), bases[0][:min(len(bases[0]), 256)])
}

// FuzzOpen opens the input as a dump and reads its first pages. An error
// from NewDump means no Dump; a Dump's reads either succeed in full or
// fail with a *memory.FaultError.
func FuzzOpen(f *testing.F) {
	bases := fuzzSeeds(f)
	fuzzAdd(f, bases)
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		runFuzzBody(t, fuzzInput(bases, mode, data))
	})
}

func runFuzzBody(t *testing.T, data []byte) {
	{
		Probe(bytes.NewReader(data))
		d, err := NewDump(bytes.NewReader(data))
		if err != nil {
			if d != nil {
				t.Fatal("error with a non-nil Dump")
			}
			return
		}
		h := d.Header()
		buf := make([]byte, h.BlockSize+16)
		count := 0
		for pfn := range d.SavedPFNs() {
			if count++; count > 64 {
				break
			}
			n, err := d.ReadAt(buf, pfn*uint64(h.BlockSize))
			if err != nil {
				var fe *memory.FaultError
				if !errors.As(err, &fe) {
					t.Fatalf("read error %v is not a FaultError", err)
				}
				if n >= len(buf) {
					t.Fatalf("n = %d with an error", n)
				}
			} else if n != len(buf) {
				t.Fatalf("short read %d without error", n)
			}
			d.RawPage(pfn)
		}
		d.ReadAt(buf, 0)
		d.ReadAt(buf, ^uint64(0)-10)
		// A read of many pages, decoded on several goroutines, must agree
		// with reading them one by one.
		if bs := uint64(h.BlockSize); bs <= 64<<10 {
			for pfn := range d.SavedPFNs() {
				many := make([]byte, 20*bs+100)
				want := make([]byte, len(many))
				at := pfn*bs + 50
				n, err := d.ReadAt(many, at)
				wn, werr := readPages(d, want, at)
				if n != wn || (err == nil) != (werr == nil) || !bytes.Equal(many[:n], want[:wn]) {
					t.Fatalf("read of many pages: %d, %v; page by page: %d, %v", n, err, wn, werr)
				}
				break
			}
		}
		d.Compressions()
		d.VMCOREINFO()
	}
}

// FuzzFlattened indexes the input as a flattened stream and reads the
// whole logical file back in odd-sized pieces.
func FuzzFlattened(f *testing.F) {
	var bases [][]byte
	for _, s := range fuzzSeeds(f) {
		bases = append(bases, flatten(s, 512, false, false))
	}
	bases = append(bases, flatten(make([]byte, 100), 7, true, true))
	fuzzAdd(f, bases)
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		fuzzFlatBody(t, fuzzInput(bases, mode, data))
	})
}

func fuzzFlatBody(t *testing.T, data []byte) {
	{
		fr, err := newFlatReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if fr.Size() < 0 {
			t.Fatal("negative size")
		}
		for i := 1; i < len(fr.segs); i++ {
			a, b := fr.segs[i-1], fr.segs[i]
			if a.off+a.n > b.off || b.n <= 0 {
				t.Fatalf("segments overlap or empty: %+v %+v", a, b)
			}
		}
		buf := make([]byte, 333)
		total := int64(0)
		for off := int64(0); off < min(fr.Size(), 1<<20); off += int64(len(buf)) {
			n, err := fr.ReadAt(buf, off)
			total += int64(n)
			if err != nil && err != io.EOF {
				t.Fatalf("read at %d: %v", off, err)
			}
			if n < len(buf) && err == nil {
				t.Fatal("short read without error")
			}
		}
	}
}
