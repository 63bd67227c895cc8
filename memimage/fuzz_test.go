package memimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// fuzzBases are small well-formed images the fuzz targets edit: LiME in
// both byte orders and AVML with compressed and stored chunks.
func fuzzBases(t testing.TB) [][]byte {
	m := testutil.NewSparseMemory()
	m.Write(0x1000, bytes.Repeat([]byte("swapper/0\x00"), 300))
	random := make([]byte, 0x800)
	for i := range random {
		random[i] = byte(i*131 + i>>3)
	}
	m.Write(0x3000, random)
	rs := []testutil.PhysRange{{Start: 0x1000, Last: 0x1fff}, {Start: 0x3000, Last: 0x37ff}}
	return [][]byte{
		lime(t, m, rs, binary.LittleEndian),
		lime(t, m, rs, binary.BigEndian),
		avml(t, m, rs),
		avmlChunks(0x8000, 0x87ff, -1, storedChunkBytes(random)),
	}
}

// FuzzNewFile edits well-formed LiME and AVML images (testutil.FuzzPatch;
// the first byte picks the base) and checks that NewFile never panics,
// that an error means a nil File and matches memory.ErrCorrupt,
// ErrUnrecognizedFormat or an I/O error, and that an opened File's ranges
// are sorted and disjoint and read in full or fail as corrupt (a chunk
// that does not decode), with the bytes before and after them not saved.
func FuzzNewFile(f *testing.F) {
	bases := fuzzBases(f)
	for i := range bases {
		f.Add([]byte{byte(i)})
		f.Add([]byte{byte(i), 0, 0, 0, 40, 4, 0, 0, 0, 0})
	}
	f.Fuzz(func(t *testing.T, edits []byte) {
		if len(edits) == 0 {
			return
		}
		img := testutil.FuzzPatch(bases[int(edits[0])%len(bases)], edits[1:])
		file, err := NewFile(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			if file != nil {
				t.Fatalf("error %v with a non-nil File", err)
			}
			if !errors.Is(err, memory.ErrCorrupt) && !errors.Is(err, ErrUnrecognizedFormat) {
				t.Fatalf("error of no documented kind: %v", err)
			}
			return
		}
		checkFile(t, file)
	})
}

func checkFile(t *testing.T, file *File) {
	t.Helper()
	var prev *Range
	for i, r := range file.Ranges() {
		if r.Last < r.Start || (prev != nil && r.Start <= prev.Last) {
			t.Fatalf("range %d [%#x-%#x] after [%#x-%#x]", i, r.Start, r.Last, prev.Start, prev.Last)
		}
		prev = &file.Ranges()[i]
		n := min(r.Last-r.Start+1, 1<<20)
		buf := make([]byte, n)
		if err := memory.ReadFull(file.Physical(), buf, r.Start); err != nil && !errors.Is(err, memory.ErrCorrupt) && !errors.Is(err, memory.ErrNotSaved) {
			t.Fatalf("range %d: %v", i, err)
		}
		if r.Start > 0 {
			if _, err := file.Physical().ReadAt(buf[:1], r.Start-1); err == nil && (i == 0 || file.Ranges()[i-1].Last != r.Start-1) {
				t.Fatalf("byte before range %d read", i)
			}
		}
	}
}

// FuzzNewRaw checks NewRaw with any layout ParseRawLayout accepts over a
// small file: no panic, an error means a nil File and matches
// memory.ErrCorrupt (what the file lacks) or ErrBadLayout (a range taking
// the rest of the file that overlaps another, which only the file's size
// shows), and an opened File reads its ranges in full.
func FuzzNewRaw(f *testing.F) {
	f.Add("0x0", uint16(0x3000))
	f.Add("0:0x1000,0x100000", uint16(0x3000))
	f.Add("0:0x2000,0x1000:0x1000", uint16(0x3000))
	f.Add("0:0x4000", uint16(0x3000))
	f.Fuzz(func(t *testing.T, layout string, size uint16) {
		l, err := ParseRawLayout(layout)
		if err != nil {
			return
		}
		img := make([]byte, size)
		file, err := NewRaw(bytes.NewReader(img), int64(len(img)), l)
		if err != nil {
			if file != nil || !errors.Is(err, memory.ErrCorrupt) && !errors.Is(err, ErrBadLayout) {
				t.Fatalf("error %v, file %v", err, file)
			}
			return
		}
		checkFile(t, file)
	})
}
