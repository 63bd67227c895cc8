package vmcore

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

func smallCore(withNote bool, bo binary.ByteOrder, m elf.Machine) []byte {
	ram := make([]byte, 0x3000)
	notes := []elfcoretest.Note{{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusX86_64(bo, 1, 2, 3)}}
	if withNote {
		notes = append(notes, elfcoretest.VMCOREINFONote(infoX86))
	} else {
		copy(ram[0x1ff0:], noteBytes(bo, "OSRELEASE=6.1\nPAGESIZE=4096\n"))
	}
	return (&elfcoretest.Builder{ByteOrder: bo, Machine: m, Notes: notes, Segments: []elfcoretest.Segment{
		{Paddr: 0, Vaddr: 0xffff888000000000, Data: ram},
		{Paddr: 0x1000000, Vaddr: 0xffffffff81000000, Data: ram[:0x1000]},
	}}).Bytes()
}

// FuzzOpen feeds hostile files to the prober and every opener behind it,
// including the decompressors and the VMCOREINFO scan. The input edits a
// seed picked by the mode byte (testutil.FuzzPatch), or with fuzzRaw in it
// is the file (up to 1 KiB): the seeds are up to 20 KiB, and taken whole
// every input that added coverage stalled fuzzing for the whole
// -fuzzminimizetime (about 1,100 execs/s). An error must mean a nil Dump;
// an opened Dump must answer every accessor, read memory with errors of
// the documented kinds, and leave no temporary file after Close.
func FuzzOpen(f *testing.F) {
	const (
		fuzzRaw      = 0x80
		fuzzMaxEdits = 128
		fuzzMaxRaw   = 1 << 10
	)
	le, be := binary.LittleEndian, binary.BigEndian
	seeds := [][]byte{
		smallCore(true, le, elf.EM_X86_64),
		smallCore(false, le, elf.EM_X86_64),
		smallCore(false, be, elf.EM_S390),
		compress(f, "xz", smallCore(true, le, elf.EM_X86_64)),
		compress(f, "zstd", smallCore(false, le, elf.EM_X86_64)),
		compress(f, "gzip", smallCore(true, le, elf.EM_X86_64)),
		kdumpBytes(map[uint64][]byte{1: pattern(4096, 1), 3: pattern(4096, 3)}, 16,
			[]elfcoretest.Note{{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusX86_64(le, 1, 2, 3)}, elfcoretest.VMCOREINFONote(infoX86)}),
		kdumpBytes(map[uint64][]byte{0: append(make([]byte, 0x100), append(noteBytes(le, infoX86), make([]byte, 4096)...)...)[:4096]}, 8, nil),
		append([]byte("makedumpfile\x00\x00\x00\x00"), make([]byte, 4096)...),
		memImageSeed(f, "lime"),
		memImageSeed(f, "avml"),
	}
	for i := range seeds {
		f.Add(uint8(i), []byte(nil))
	}
	// e_phnum of the first core, and a raw ELF header alone.
	f.Add(uint8(0), []byte{0, 0, 0, 56, 2, 0xff, 0x7f})
	f.Add(uint8(fuzzRaw), seeds[0][:64])
	tmp := f.TempDir()
	opt := Options{TempDir: tmp, MaxDecompressedSize: 4 << 20, ScanLimit: 4 << 20}
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		if mode&fuzzRaw != 0 {
			data = data[:min(len(data), fuzzMaxRaw)]
		} else {
			data = testutil.FuzzPatch(seeds[int(mode)%len(seeds)], data[:min(len(data), fuzzMaxEdits)])
		}
		d, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), opt)
		if err != nil {
			if d != nil {
				t.Fatalf("error %v with a non-nil Dump", err)
			}
		} else {
			_ = d.Format()
			_ = d.VMCOREINFO()
			_ = d.Info()
			_ = d.InfoErr()
			_ = d.InfoSource()
			_ = d.Arch()
			_ = d.PageSize()
			_ = d.CPUs()
			buf := make([]byte, 64)
			n := 0
			d.be.ranges(func(start, last uint64) bool {
				for _, a := range []uint64{start, last - 63, last} {
					got, err := d.Physical().ReadAt(buf, a)
					if got < len(buf) && err == nil {
						t.Fatalf("short read at %#x without error", a)
					}
					if err != nil && !errors.Is(err, memory.ErrNotSaved) && !errors.Is(err, memory.ErrCorrupt) {
						t.Logf("read at %#x: %v", a, err) // I/O-style errors are allowed but logged
					}
				}
				n++
				return n < 16
			})
			if k, err := d.Kernel(); err == nil {
				k.ReadAt(buf, 0xffffffff81000000)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
			t.Fatalf("temporary file %s left behind", ents[0].Name())
		}
	})
}

// memImageSeed is a LiME or AVML image of imageMemory.
func memImageSeed(tb testing.TB, format string) []byte {
	m, rs := imageMemory(binary.LittleEndian, infoX86)
	var b bytes.Buffer
	var err error
	if format == "lime" {
		err = testutil.WriteLiME(&b, m, rs, binary.LittleEndian)
	} else {
		err = testutil.WriteAVML(&b, m, rs)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
