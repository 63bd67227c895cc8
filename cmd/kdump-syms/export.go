package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/export"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// cmdExport writes the dump's symbols as files other tools read: with
// --format elf, vmlinux.syms and one MODULE.ko.syms per module (package
// export), for gdb's symbol-file and add-symbol-file, nm and readelf.
func cmdExport(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("export", "export [flags] --format elf -o DIR VMCORE")
	c.register(fs)
	format := fs.String("format", "elf", "output `format`: elf (DIR/vmlinux.syms and DIR/MODULE.ko.syms, ELF symbol files)")
	out := fs.String("o", "", "output `DIR` (created if needed; files of the same names are replaced)")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("export: no VMCORE given")
	case *out == "":
		return usagef("export: no output directory given (-o DIR)")
	case *format != "elf":
		return usagef("export: --format %q: only elf", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	kres, err := s.Kallsyms()
	if err != nil {
		return c.rep.fatal(stderr, err)
	}
	all := func(f symfinder.Finder) ([]symfinder.Symbol, error) {
		var syms []symfinder.Symbol
		err := f.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
			syms = append(syms, sym)
			return true
		})
		return syms, err
	}
	vmlinux, err := all(kres.Finder())
	if err != nil {
		return c.rep.fatal(stderr, err)
	}
	var mods []export.Module
	if set, merr := s.Modules(); set != nil {
		for _, m := range set.Modules() {
			if m.Symbols == nil {
				continue // reported by addModuleFailures
			}
			syms, err := all(m.Symbols)
			if err != nil {
				c.rep.add(err)
				continue
			}
			mods = append(mods, export.Module{Name: m.Name, Sections: export.ModuleSections(m.Regions), Symbols: syms})
		}
		c.addModuleFailures(s)
	} else {
		c.rep.add(merr)
	}
	a := s.Dump().Arch()
	t := export.Target{ByteOrder: a.ByteOrder, Class: elf.ELFCLASS64, Machine: a.ELFMachine()}
	if a.PtrSize == 4 {
		t.Class = elf.ELFCLASS32
	}
	written, err := export.WriteDir(*out, t, vmlinux, mods)
	w := bufio.NewWriter(stdout)
	for _, p := range written {
		fmt.Fprintln(w, p)
	}
	if ferr := w.Flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		c.rep.add(err)
	}
	if len(written) == 0 {
		return c.rep.finish(stderr, false)
	}
	return c.rep.finish(stderr, true)
}
