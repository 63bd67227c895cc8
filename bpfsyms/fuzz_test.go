package bpfsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// fuzzWindow is the size of the memory FuzzWalk maps at synthBase.
const fuzzWindow = 8 << 12

// fuzzSeed builds a well-formed kernel whose list heads sit at fixed
// places at the start of the window: bpf_kallsyms at +0,
// ftrace_ops_trampoline_list at +16, ftrace_mod_maps at +32, and the kprobe
// caches at +48 and +80.
func fuzzSeed(old bool) []byte {
	b := newKBuilder()
	b.head("bpf_kallsyms")
	tl := b.head("ftrace_ops_trampoline_list")
	b.head("ftrace_mod_maps")
	caches := []uint64{b.alloc(24), b.alloc(24)}
	for i, name := range []string{"kprobe_insn_page", "kprobe_optinsn_page"} {
		a := caches[i]
		b.mem.PutU64(a+8, a+8)
		b.mem.PutU64(a+16, a+8)
		b.mem.PutU64(a, b.str(name))
		p := b.alloc(24)
		b.mem.PutU64(p+16, 0xffffffffc4000000)
		b.link(a+8, p)
	}
	if old {
		b.oldProg(0x0123456789abcdef, "p", 1, 0x40, "f")
	} else {
		b.ksym(synthBase+0x8000, synthBase+0x8040, []byte("bpf_prog_0123456789abcdef_p"))
		b.ksym(synthBase+0x8040, synthBase+0x8080, []byte("bpf_trampoline_1"))
	}
	o := b.alloc(40)
	b.mem.PutU64(o, synthBase+0x9000)
	b.mem.PutU64(o+8, 0x40)
	b.link(tl, o+16)
	out := make([]byte, 0, fuzzWindow)
	for pg := uint64(synthBase); pg < synthBase+fuzzWindow; pg += 4096 {
		p := b.mem.Pages[pg]
		if p == nil {
			p = make([]byte, 4096)
		}
		out = append(out, p...)
	}
	if old {
		out[fuzzWindow-1] = 1 // selects oldLayout
	}
	return out
}

// FuzzWalk feeds random bytes to every loader as kernel memory: a 32 KiB
// window holding the list heads and whatever they point to, read with the
// synthetic layouts (the last byte's low bit picks the pre-v5.7 one).
// Pointers may lead anywhere; each loader must end with a set or an error,
// never panic or hang, and a set must be fully iterable.
func FuzzWalk(f *testing.F) {
	f.Add(fuzzSeed(false))
	f.Add(fuzzSeed(true))
	f.Add(make([]byte, 128))
	heads := map[string]uint64{
		"bpf_kallsyms": synthBase, "ftrace_ops_trampoline_list": synthBase + 16, "ftrace_mod_maps": synthBase + 32,
		"kprobe_insn_slots": synthBase + 48, "kprobe_optinsn_slots": synthBase + 80,
	}
	syms := func(n string) (uint64, bool) { a, ok := heads[n]; return a, ok }
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzWindow {
			data = data[:fuzzWindow]
		}
		m := newFakeMem()
		m.Write(synthBase, data)
		lay := synthLayout
		if len(data) > 0 && data[len(data)-1]&1 != 0 {
			lay = oldLayout
		}
		// A 32 KiB window holds at most 4096 list nodes; a smaller budget
		// keeps each run short while still hitting the cap.
		opt := Options{Layout: lay, maxEntries: 1 << 10}
		for _, load := range []func(*fakeMem) (*Set, error){
			func(m *fakeMem) (*Set, error) { return LoadBPF(m, syms, opt) },
			func(m *fakeMem) (*Set, error) { return LoadFtrace(m, syms, opt) },
			func(m *fakeMem) (*Set, error) { return LoadKprobes(m, syms, opt) },
		} {
			s, err := load(m)
			if s == nil {
				if err == nil {
					t.Fatal("nil set without an error")
				}
				continue
			}
			if (err == nil) != (s.Err() == nil) {
				t.Fatalf("error %v but set error %v", err, s.Err())
			}
			n := 0
			_ = s.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
				if sym.Size > MaxRange {
					t.Fatalf("%s: size %d", sym.Name, sym.Size)
				}
				n++
				return true
			})
			if n > 2<<10 {
				t.Fatalf("%d symbols", n)
			}
			_ = s.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: synthBase + 0x8010}, func(symfinder.Symbol) bool { return true })
		}
	})
}
