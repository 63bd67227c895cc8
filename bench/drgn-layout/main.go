// Command drgn-layout prints, as a btflayout table, the struct offsets the
// drgn peer of bench/drgn-paired needs to walk a dump's module list: drgn
// reads no BTF, so without debug info it has no type for struct module.
// The table is made once per dump, before and outside the timed runs; the
// drgn side is thus given its types for free.
//
// Usage: drgn-layout VMCORE >TABLE
package main

import (
	"fmt"
	"os"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: drgn-layout VMCORE")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "drgn-layout:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, path)
	if err != nil {
		return err
	}
	defer s.Close()
	k, err := s.Kallsyms()
	if err != nil {
		return err
	}
	syms := modsyms.FromFinder(k.Finder())
	start, ok1 := syms("__start_BTF")
	stop, ok2 := syms("__stop_BTF")
	if !ok1 || !ok2 {
		return fmt.Errorf("no __start_BTF/__stop_BTF in the kernel's symbols")
	}
	kmem, err := s.Kernel()
	if err != nil {
		return err
	}
	b, err := btflayout.FromMemory(kmem, start, stop)
	if err != nil {
		return err
	}
	// The fields drgn's load_module_kallsyms reads (drgn/helpers/linux/
	// kallsyms.py and module.py), in both generations of struct module.
	return btflayout.WriteTable(os.Stdout, b, btflayout.Want{Structs: map[string][]string{
		"module":       {"list", "name", "kallsyms", "symtab", "num_symtab", "strtab"},
		"mod_kallsyms": {"symtab", "num_symtab", "strtab", "typetab"},
		"list_head":    {"next", "prev"},
	}})
}
