package unwind

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// FuzzFramePointer edits a well-formed stack of frame records: both walks
// end, within MaxFrames, with a reason, whatever the stack holds.
func FuzzFramePointer(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0x10, 8, 0x00, 0x01, 0x01, 0x08, 0x00, 0x80, 0xff, 0xff}) // a loop
	base := make([]byte, 16<<10)
	m := testutil.NewSparseMemory()
	for i := range 20 {
		fp := stack + uint64(i)*0x100
		m.PutU64(fp, fp+0x100)
		m.PutU64(fp+8, text+uint64(i)*0x10)
	}
	m.PutU64(stack+19*0x100, 0)
	for a := uint64(0); a < uint64(len(base)); a += 4096 {
		if p := m.Pages[stack+a]; p != nil {
			copy(base[a:], p)
		}
	}
	f.Fuzz(func(t *testing.T, edits []byte) {
		img := testutil.FuzzPatch(base, edits)
		mem := testutil.NewSparseMemory()
		mem.Write(stack, img)
		for _, walk := range []func(memory.Reader, uint64, uint64, Options) ([]Frame, Stop){FramePointer, BackChainS390} {
			fr, stop := walk(mem, text, stack, Options{KernelStart: text, MaxFrames: 64})
			if len(fr) > 64 || len(fr) == 0 {
				t.Fatalf("%d frames", len(fr))
			}
			if !stop.Final && stop.Err == nil {
				t.Fatal("stop without a reason")
			}
		}
	})
}
