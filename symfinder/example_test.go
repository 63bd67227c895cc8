package symfinder_test

import (
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Build an index from symbols of known address and look an address up.
// Sizes are derived from the next higher address, as the kernel does.
func ExampleBuilder() {
	b := symfinder.NewBuilder("vmlinux", "")
	b.AddString(0xffffffff81000000, 'T', "startup_64")
	b.AddString(0xffffffff81000070, 'T', "secondary_startup_64")
	b.AddString(0xffffffff810001f0, 't', "verify_cpu")
	b.SetDerivedEnd(0xffffffff81000200) // _etext
	ix, err := b.Build()
	if err != nil {
		panic(err)
	}
	addr := uint64(0xffffffff81000123)
	if s, ok := ix.Lookup(addr); ok {
		fmt.Println(s.Format(addr))
	}
	// Output:
	// secondary_startup_64+0xb3/0x180
}

// Ask two finders in order, one of them a function: the first hit wins,
// and finding nothing anywhere is ErrNotFound.
func ExampleChain() {
	b := symfinder.NewBuilder("vmlinux", "")
	b.AddString(0xffffffff81001000, 'T', "__do_sys_read")
	b.SetDerivedEnd(0xffffffff81001040)
	vmlinux, _ := b.Build()

	// A finder for JIT code a caller knows about from elsewhere.
	jit := symfinder.FinderFunc{
		FinderName: "jit",
		Func: func(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
			s := symfinder.Symbol{Name: "bpf_prog_demo", Addr: 0xffffffffc0000000, Size: 0x80, Kind: 't', Module: "bpf"}
			if (q.Kind == symfinder.ByAddr && s.Contains(q.Addr)) ||
				(q.Kind == symfinder.ByName && q.Name == s.Name) || q.Kind == symfinder.All {
				yield(s)
			}
			return nil
		},
	}
	chain, err := symfinder.NewChain(vmlinux, jit)
	if err != nil {
		panic(err)
	}
	for _, addr := range []uint64{0xffffffff81001004, 0xffffffffc0000010, 0x1234} {
		s, err := chain.Lookup(addr)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s.Format(addr))
	}
	fmt.Println(chain.Finders())
	// Output:
	// __do_sys_read+0x4/0x40
	// bpf_prog_demo+0x10/0x80 [bpf]
	// symfinder: address 0x1234: symbol not found
	// [{vmlinux true} {jit true}]
}

// Read a saved /proc/kallsyms and resolve addresses in vmlinux and in a
// module. The highest symbol of each group has no known end.
func ExampleParseKallsyms() {
	const text = "ffffffff81000000 T _text\n" +
		"ffffffff81000000 T startup_64\n" +
		"ffffffff81000070 T secondary_startup_64\n" +
		"ffffffffc0a00000 T xfs_init_fs_context\t[xfs]\n" +
		"ffffffffc0a01000 t xfs_fs_fill_super\t[xfs]\n"
	f, err := symfinder.ParseKallsyms(strings.NewReader(text), "kallsyms")
	if err != nil {
		panic(err)
	}
	chain, _ := symfinder.NewChain(f)
	for _, addr := range []uint64{0xffffffff81000010, 0xffffffffc0a00abc} {
		s, _ := chain.Lookup(addr)
		fmt.Println(s.Format(addr))
	}
	s, _ := chain.LookupName("xfs_fs_fill_super")
	fmt.Printf("%#x %c %s [%s]\n", s.Addr, s.Kind, s.Name, s.Module)
	// Output:
	// _text+0x10/0x70
	// xfs_init_fs_context+0xabc/0x1000 [xfs]
	// 0xffffffffc0a01000 t xfs_fs_fill_super [xfs]
}

// Shift a System.map's link-time addresses by the dump's KASLR offset
// (VMCOREINFO's KERNELOFFSET); per-CPU offsets below _text stay put.
func ExampleParseSystemMap() {
	const text = "0000000000001000 D cpu_debug_store\n" +
		"0000000000002000 D __per_cpu_end\n" +
		"ffffffff81000000 T _text\n" +
		"ffffffff81000100 T start_kernel\n"
	f, err := symfinder.ParseSystemMap(strings.NewReader(text), "System.map", 0x2c000000)
	if err != nil {
		panic(err)
	}
	_ = f.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		fmt.Printf("%016x %c %s\n", s.Addr, s.Kind, s.Name)
		return true
	})
	// Output:
	// 0000000000001000 D cpu_debug_store
	// 0000000000002000 D __per_cpu_end
	// ffffffffad000000 T _text
	// ffffffffad000100 T start_kernel
}

// A finder for code the caller knows about (here a JIT with one region),
// answering as the kernel answers for a module: an address in the
// padding after a function is that function's, up to the next symbol;
// one outside the region is not found, and the chain asks the next
// finder. The recorded size stays available as ELFSize.
func ExampleBuilder_SetExtents() {
	b := symfinder.NewBuilder("jit", "myjit")
	b.AddSized(0xffffffffc1000000, 0x30, 't', []byte("jit_entry"))
	b.AddSized(0xffffffffc1000040, 0x100, 't', []byte("jit_body"))
	b.SetExtents([]symfinder.Range{{Start: 0xffffffffc1000000, End: 0xffffffffc1001000}}, symfinder.SkippedInModuleLookups)
	jit, err := b.Build()
	if err != nil {
		panic(err)
	}
	chain, _ := symfinder.NewChain(jit)
	for _, addr := range []uint64{0xffffffffc1000038, 0xffffffffc1000ff0, 0xffffffffc1001000} {
		s, err := chain.Lookup(addr)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s.Format(addr), "ELF size", s.ELFSize)
	}
	// Output:
	// jit_entry+0x38/0x40 [myjit] ELF size 48
	// jit_body+0xfb0/0xfc0 [myjit] ELF size 256
	// symfinder: address 0xffffffffc1001000: symbol not found
}
