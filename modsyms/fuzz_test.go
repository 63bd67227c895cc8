package modsyms

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// FuzzWalk feeds random bytes to the walk as kernel memory: a 64 KiB
// window holding the list head, struct modules, mod_kallsyms and tables,
// read with the fixed synthetic layout64. Pointers in the data may lead
// anywhere; the walk must end with a result or an error, never panic or
// hang, and a result must be fully iterable.
func FuzzWalk(f *testing.F) {
	// Seed: a well-formed two-module kernel from the test builder, rebased
	// into the window.
	b := newKBuilder(f, layout64)
	b.add(kmod{name: "a", textSize: 16, syms: []ksym{{name: "a1", value: 0x1000, size: 4, typ: 't', export: true}}})
	b.add(kmod{name: "b", syms: []ksym{{name: "b1", value: 0x2000, typ: 'd'}}})
	f.Add(seedWindow(b))
	f.Add(make([]byte, 512))
	lay := b.lay
	f.Fuzz(func(t *testing.T, data []byte) {
		const base = 0xffffffffc0000000
		m := newFakeMem()
		if len(data) > 1<<16 {
			data = data[:1<<16]
		}
		m.Write(base, data)
		head := uint64(base + 4096 - 16) // where seedWindow puts it
		set, err := Load(m, func(n string) (uint64, bool) { return head, n == "modules" }, Options{Layout: lay})
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
		_ = set.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: base + 0x100}, func(symfinder.Symbol) bool { return true })
	})
}

// seedWindow packs the builder's pages into one window at
// 0xffffffffc0000000 whose first 16 bytes are the list head: pages are
// laid out in address order, the head page first.
func seedWindow(b *kbuilder) []byte {
	// The builder's head lives elsewhere; copy the module pages and make
	// the window's first bytes a head pointing at the first module.
	const base = 0xffffffffc0000000
	out := make([]byte, 0, 1<<16)
	for pg := uint64(base); pg < base+1<<16; pg += 4096 {
		p := b.mem.Pages[pg]
		if p == nil {
			p = make([]byte, 4096)
		}
		out = append(out, p...)
	}
	// The first page is module a's struct module (the builder allocates it
	// first); put the head at its unused tail and link it in.
	headOff := uint64(4096 - 16)
	first := uint64(base + 8)
	binary.LittleEndian.PutUint64(out[headOff:], first)
	binary.LittleEndian.PutUint64(out[headOff+8:], first)
	return out
}
