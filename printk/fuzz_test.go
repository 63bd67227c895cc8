package printk

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// fuzzWalk opens the log and walks it to the end. The contract: an error
// means no Log; a Log can be walked to its end; each record's text is at
// most 64 KiB; nothing panics or runs without bound.
func fuzzWalk(t *testing.T, w *world, release string, opt Options) {
	l, err := Open(w.mem, w.info(release), opt)
	if err != nil {
		if l != nil {
			t.Fatal("error with a Log")
		}
		return
	}
	n := 0
	for e := range l.Entries() {
		if e.Gap == nil && len(e.Record.Text) > 1<<16 {
			t.Fatalf("text of %d bytes", len(e.Record.Text))
		}
		n++
		if n > 1<<20 {
			t.Fatal("walk without end")
		}
	}
}

// FuzzRing edits a well-formed lockless ring (testutil.FuzzPatch) that has
// wrapped: control data, descriptors, infos and text alike.
func FuzzRing(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x02, 0x00, 4, 40, 0, 0, 0})            // size_bits
	f.Add([]byte{0, 0, 0x10, 0x08, 8, 1, 2, 3, 4, 5, 6, 7, 8}) // a descriptor
	w0 := newRingWorld(binary.LittleEndian, 8, 5, 10)
	for i := range 100 {
		w0.add(textRec(i))
	}
	w0.finish()
	base := append([]byte(nil), w0.mem.b...)
	f.Fuzz(func(t *testing.T, edits []byte) {
		w := *w0.world
		w.mem = &flatMem{base: w0.mem.base, b: testutil.FuzzPatch(base, edits)}
		fuzzWalk(t, &w, "6.1.0", Options{Target: le64})
	})
}

// FuzzVarBuf edits a well-formed buffer of the older records that has
// wrapped.
func FuzzVarBuf(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x01, 0x10, 4, 0xff, 0xff, 0xff, 0xff}) // log_buf_len
	f.Add([]byte{0, 0, 0x10, 0x08, 2, 0xf0, 0xff})             // a record's len
	v0 := newVarWorld(binary.LittleEndian, 8, 2048, true)
	for i := range 100 {
		v0.add(textRec(i))
	}
	v0.finish(7)
	base := append([]byte(nil), v0.mem.b...)
	f.Fuzz(func(t *testing.T, edits []byte) {
		w := *v0.world
		w.mem = &flatMem{base: v0.mem.base, b: testutil.FuzzPatch(base, edits)}
		fuzzWalk(t, &w, "4.4.0", Options{Target: le64, Symbol: func(string) (uint64, bool) { return v0.firstSeqAddr, true }})
	})
}
