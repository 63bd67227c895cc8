package modsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// fuzzBase is where FuzzWalk maps its window; the list head is its first
// 16 bytes.
const fuzzBase = 0xffffffffc0000000

// fuzzWindow bounds FuzzWalk's world; fuzzMaxEdits and fuzzMaxRaw cap its
// input in edits and in raw memory. Bytes past a cap are ignored, so the
// minimizer cuts them first.
const (
	fuzzWindow   = 4 << 10
	fuzzMaxEdits = 128
	fuzzMaxRaw   = 1 << 10
)

// FuzzWalk feeds hostile kernel memory to the walk: a window of up to
// 4 KiB holding the list head, struct modules, mod_kallsyms and tables,
// read with the fixed synthetic layout64. The input edits a well-formed
// two-module window (testutil.FuzzPatch), or with raw is the window (up to
// 1 KiB): edits keep inputs to a few bytes, so mutations land in a working
// list and the fuzzer minimizes each new input in moments. Pointers may
// lead anywhere; the walk must end with a result or an error, never panic
// or hang, and a result must be fully iterable.
func FuzzWalk(f *testing.F) {
	// The world: a two-module kernel from the test builder, packed into
	// the window with a 16-byte allocation granule.
	b := newKBuilder(f, layout64)
	b.head, b.next, b.gran = fuzzBase, fuzzBase+16, 16
	b.mem.Write(b.head, u64s(b.head, b.head))
	b.add(kmod{name: "a", textSize: 16, syms: []ksym{{name: "a1", value: 0x1000, size: 4, typ: 't', export: true}}})
	b.add(kmod{name: "b", syms: []ksym{{name: "b1", value: 0x2000, typ: 'd'}}})
	if b.next > fuzzBase+fuzzWindow {
		f.Fatalf("world of %d bytes exceeds the window", b.next-fuzzBase)
	}
	world := make([]byte, b.next-fuzzBase)
	if _, err := b.mem.ReadAt(world, fuzzBase); err != nil {
		f.Fatal(err)
	}
	// The world must walk cleanly, or the fuzzer starts from nothing.
	if set, err := Load(b.mem, b.syms(), Options{Target: le64, Layout: b.lay}); err != nil || len(set.Modules()) != 2 {
		f.Fatalf("world: %v", err)
	}
	f.Add(false, []byte(nil))
	// A wild list.next in module a (at +16, list at +8): the walk breaks
	// and recovers b from the head's prev.
	f.Add(false, []byte{0, 0, 0, 24, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	// Raw seeds stay small: a raw input is minimized byte by byte.
	f.Add(true, world[:256])
	f.Add(true, make([]byte, 64))
	lay := b.lay
	syms := func(n string) (uint64, bool) { return fuzzBase, n == "modules" }
	f.Fuzz(func(t *testing.T, raw bool, data []byte) {
		mem := data[:min(len(data), fuzzMaxRaw)]
		if !raw {
			mem = testutil.FuzzPatch(world, data[:min(len(data), fuzzMaxEdits)])
		}
		m := newFakeMem()
		m.Write(fuzzBase, mem)
		set, err := Load(m, syms, Options{Target: le64, Layout: lay})
		if set == nil {
			if err == nil {
				t.Fatal("nil set without an error")
			}
			return
		}
		if len(set.Modules()) > MaxModules {
			t.Fatal("too many modules")
		}
		_ = set.Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { return true })
		_ = set.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: fuzzBase + 0x100}, func(symfinder.Symbol) bool { return true })
	})
}
