package kdumpsyms_test

import (
	"fmt"
	"log"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/oops"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// A real dump bundled with the tests: Debian 6.12 panicked under QEMU,
// written by makedumpfile -c -d 31 and cut down by kdump-syms extract.
const bundled = "testdata/vmcores/deb13-6.12-amd64/dumps/mdf-d31-zlib.kdump.xz"

func ExampleOpen() {
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, bundled)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// Name to address: the core kernel and a module. (The addresses
	// are this boot's, KASLR-shifted.)
	var addrs []uint64
	for _, name := range []string{"vfs_read", "xfs_fs_fill_super"} {
		sym, err := s.Chain().LookupName(name)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %c %q\n", sym.Name, sym.Kind, sym.Module)
		addrs = append(addrs, sym.Addr)
	}
	// Address to symbol, as the kernel's %pS prints it.
	for _, a := range []uint64{addrs[0] + 0x2a, addrs[1] + 0x10} {
		sym, err := s.Chain().Lookup(a)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(sym.Format(a))
	}
	// Output:
	// vfs_read T ""
	// xfs_fs_fill_super t "xfs"
	// vfs_read+0x2a/0x370
	// xfs_fs_fill_super+0x10/0x9b0 [xfs]
}

// A caller's own finder joins the chain and answers before the dump's
// sources, for example to name a JIT region the kernel does not know.
func ExampleSession_Chain() {
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, bundled)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	mine := symfinder.FinderFunc{FinderName: "my-jit", Func: func(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
		jit := symfinder.Symbol{Name: "jit_stub", Addr: 0xffffffffc1000000, Size: 0x100, Kind: 't', Module: "myjit"}
		if q.Kind == symfinder.ByAddr && jit.Contains(q.Addr) || q.Kind == symfinder.ByName && q.Name == jit.Name || q.Kind == symfinder.All {
			yield(jit)
		}
		return nil
	}}
	if err := s.Chain().Insert(0, mine); err != nil {
		log.Fatal(err)
	}
	sym, _ := s.Chain().Lookup(0xffffffffc1000010)
	fmt.Println(sym.Format(0xffffffffc1000010))
	for _, f := range s.Chain().Finders() {
		fmt.Print(f.Name, " ")
	}
	fmt.Println()
	// Output:
	// jit_stub+0x10/0x100 [myjit]
	// my-jit kallsyms modules ftrace bpf kprobes
}

// Example_triage is the first look at a crash, with exported API only: the
// crash facts, the crashing CPU's symbolized stack, and an oops line
// (here the kernel's own, from the log) annotated and checked against the
// dump.
func Example_triage() {
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, bundled)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	c := s.Crash()
	fmt.Printf("%s\nCPU %d, PID %d (%s), registers in note %d\n", c.Report.Message, c.CPU(), c.PID(), c.Comm(), c.Note)
	st := s.Unwind(s.Dump().CPUs()[c.Note].Regs)
	for _, f := range st.Frames[:3] {
		if sym, err := s.Chain().Lookup(f.PC); err == nil {
			fmt.Println(" ", sym.Format(f.PC))
		}
	}
	check := &oops.Check{Release: s.Dump().Info().OSRelease()}
	a := oops.New(oops.Options{Resolver: s.Chain(), Digits: 16, MinAddr: 1 << 63, ReturnAddrs: true, Check: check})
	fmt.Print(a.Line("Call Trace:\n"), a.Line(" sysrq_handle_crash+0x1a/0x21\n"))
	fmt.Println(check.Summary())
	// Output:
	// Kernel panic - not syncing: sysrq triggered crash
	// CPU 0, PID 1 (init), registers in note 0
	//   delay_tsc+0x37/0xa0
	//   panic+0x2d0/0x2db
	//   sysrq_handle_crash+0x1a/0x20
	// Call Trace:
	//  sysrq_handle_crash+0x1a/0x21  [kdump-syms: sysrq_handle_crash is 0x20 long in this dump]
	// the text does not match this dump: 1 of 1 symbolic frames disagree with it (flagged on their lines)
}
