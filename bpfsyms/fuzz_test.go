package bpfsyms

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// fuzzWindow caps the memory FuzzWalk maps at synthBase. It is small on
// purpose: inputs stay small, and the fuzzer minimizes every new input by
// trying cuts per byte, up to -fuzzminimizetime each.
const fuzzWindow = 4 << 10

// fuzzMaxEntries is FuzzWalk's node budget: a 4 KiB window holds at most
// 256 list nodes, so a smaller budget is still reached.
const fuzzMaxEntries = 1 << 7

// fuzzPage is FuzzWalk's PAGE_SIZE (fuzzTarget's): a pre-v5.7 seed
// program's bpf_binary_header takes a page, which must fit in the window.
const fuzzPage = 256

// fuzzTarget is the machine of FuzzWalk's kernel.
var fuzzTarget = memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: fuzzPage}

// fuzzSeed builds a well-formed kernel whose list heads sit at fixed
// places at the start of the window: bpf_kallsyms at +0,
// ftrace_ops_trampoline_list at +16, ftrace_mod_maps at +32, and the kprobe
// caches at +48 and +80.
func fuzzSeed(old bool) []byte {
	b := newKBuilder()
	b.page = fuzzPage
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
	// The builder packs its allocations from synthBase: the seed is what
	// it used, no more.
	if b.next > synthBase+fuzzWindow {
		panic("fuzz seed exceeds the window")
	}
	out := make([]byte, b.next-synthBase)
	if _, err := b.mem.ReadAt(out, synthBase); err != nil {
		panic(err)
	}
	return out
}

// FuzzWalk feeds random bytes to every loader as kernel memory: a window of
// up to 4 KiB holding the list heads and whatever they point to, read with
// the synthetic layouts (old picks the pre-v5.7 one). Pointers may lead
// anywhere; each loader must end with a set or an error, never panic or
// hang, and a set must be fully iterable.
func FuzzWalk(f *testing.F) {
	f.Add(false, fuzzSeed(false))
	f.Add(true, fuzzSeed(true))
	f.Add(false, make([]byte, 128))
	heads := map[string]uint64{
		"bpf_kallsyms": synthBase, "ftrace_ops_trampoline_list": synthBase + 16, "ftrace_mod_maps": synthBase + 32,
		"kprobe_insn_slots": synthBase + 48, "kprobe_optinsn_slots": synthBase + 80,
	}
	syms := func(n string) (uint64, bool) { a, ok := heads[n]; return a, ok }
	loaders := []func(*fakeMem, Options) (*Set, error){
		func(m *fakeMem, opt Options) (*Set, error) { return LoadBPF(m, syms, opt) },
		func(m *fakeMem, opt Options) (*Set, error) { return LoadFtrace(m, syms, opt) },
		func(m *fakeMem, opt Options) (*Set, error) { return LoadKprobes(m, syms, opt) },
	}
	// The well-formed seeds must load cleanly, or the fuzzer starts from
	// nothing.
	for _, old := range []bool{false, true} {
		m := newFakeMem()
		m.Write(synthBase, fuzzSeed(old))
		opt := Options{Layout: map[bool]fakeLayout{false: synthLayout, true: oldLayout}[old], Target: fuzzTarget, maxEntries: fuzzMaxEntries}
		for i, load := range loaders {
			if s, err := load(m, opt); err != nil || s.Len() == 0 {
				f.Fatalf("seed (old %v), loader %d: %v", old, i, err)
			}
		}
	}
	f.Fuzz(func(t *testing.T, old bool, data []byte) {
		if len(data) > fuzzWindow {
			data = data[:fuzzWindow]
		}
		m := newFakeMem()
		m.Write(synthBase, data)
		lay := synthLayout
		if old {
			lay = oldLayout
		}
		opt := Options{Layout: lay, Target: fuzzTarget, maxEntries: fuzzMaxEntries}
		// The BPF loader once more without layouts: struct bpf_ksym's
		// inferred from the entries (a kernel without BTF).
		noLayout := func(m *fakeMem, opt Options) (*Set, error) {
			opt.Layout = fakeLayout{"list_head": synthLayout["list_head"]}
			return LoadBPF(m, syms, opt)
		}
		for _, load := range append(loaders, noLayout) {
			s, err := load(m, opt)
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
			if n > 2*fuzzMaxEntries {
				t.Fatalf("%d symbols", n)
			}
			_ = s.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: synthBase + 0x8010}, func(symfinder.Symbol) bool { return true })
		}
	})
}

// codeFuncs are the functions FuzzHeadsThroughCode's kernel has, each
// given 32 bytes at codeBase: a fake instruction set where the code is
// the little-endian addresses it refers to.
var codeFuncs = []string{"bpf_get_kallsym", "bpf_ksym_add", "ftrace_mod_address_lookup", "ftrace_mod_get_kallsym", "kprobe_get_kallsym", "kprobe_optimizer", "kprobe_optimizer_thread", "arch_optimize_kprobes"}

const codeBase = synthBase + fuzzWindow - 256

// FuzzHeadsThroughCode is FuzzWalk for a kernel without data symbols: the
// list heads are found through the code of the functions that use them
// (Options.Code), code and data both from the fuzzer's bytes. Every loader
// must end with a set or an error, never panic or hang.
func FuzzHeadsThroughCode(f *testing.F) {
	seed := make([]byte, fuzzWindow)
	copy(seed, fuzzSeed(false))
	refs := map[string][]uint64{
		"bpf_get_kallsym": {synthBase}, "bpf_ksym_add": {synthBase},
		"ftrace_mod_address_lookup": {synthBase + 32}, "ftrace_mod_get_kallsym": {synthBase + 32, synthBase + 16},
		"kprobe_get_kallsym": {synthBase + 48, synthBase + 80},
	}
	for i, fn := range codeFuncs {
		for j, a := range refs[fn] {
			binary.LittleEndian.PutUint64(seed[codeBase-synthBase+uint64(32*i+8*j):], a)
		}
	}
	f.Add(seed)
	f.Add(make([]byte, 128))
	syms := func(n string) (uint64, bool) {
		switch n {
		case "_stext":
			return synthBase - 0x100000, true
		case "_etext":
			return synthBase, true
		}
		for i, fn := range codeFuncs {
			if n == fn {
				return codeBase + uint64(32*i), true
			}
		}
		return 0, false
	}
	code := &Code{
		Func: func(n string) (uint64, uint64, bool) {
			a, ok := syms(n)
			return a, a + 32, ok && a >= codeBase
		},
		Refs: func(_ uint64, b []byte) ([]uint64, error) {
			var out []uint64
			for i := 0; i+8 <= len(b); i += 8 {
				out = append(out, binary.LittleEndian.Uint64(b[i:]))
			}
			slices.Sort(out)
			return slices.Compact(out), nil
		},
	}
	loaders := []func(memory.Reader, Symbols, Options) (*Set, error){LoadBPF, LoadFtrace, LoadKprobes}
	m := newFakeMem()
	m.Write(synthBase, seed)
	for i, load := range loaders {
		if s, err := load(m, syms, Options{Layout: synthLayout, Target: fuzzTarget, maxEntries: fuzzMaxEntries, Code: code}); err != nil || s.Len() == 0 {
			f.Fatalf("seed, loader %d: %v", i, err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzWindow {
			data = data[:fuzzWindow]
		}
		m := newFakeMem()
		m.Write(synthBase, data)
		for _, load := range loaders {
			for _, lay := range []fakeLayout{synthLayout, {}} { // with BTF, and inferring (kprobes)
				s, err := load(m, syms, Options{Layout: lay, Target: fuzzTarget, maxEntries: fuzzMaxEntries, Code: code})
				if s == nil {
					if err == nil {
						t.Fatal("nil set without an error")
					}
					continue
				}
				n := 0
				_ = s.Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { n++; return true })
				if n > 2*fuzzMaxEntries {
					t.Fatalf("%d symbols", n)
				}
			}
		}
	})
}
