package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
)

// layoutFlags are the flags that say where struct layouts come from.
type layoutFlags struct {
	btf, table, mode string
}

func (l *layoutFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.btf, "btf", "", "struct layouts from a BTF `file` (a saved /sys/kernel/btf/vmlinux, or a vmlinux with .BTF or DWARF)")
	fs.StringVar(&l.table, "layout", "", "struct layouts from a layout table `file` (format: see the README)")
	fs.StringVar(&l.mode, "layouts", "auto", "where struct layouts come from without --btf/--layout: auto (the dump's BTF, else inferred), btf, infer")
}

// apply sets the session options the flags ask for.
func (l *layoutFlags) apply(opt *kdumpsyms.Options) error {
	switch l.mode {
	case "auto", "":
		opt.Layouts = kdumpsyms.LayoutsAuto
	case "btf":
		opt.Layouts = kdumpsyms.LayoutsBTF
	case "infer":
		opt.Layouts = kdumpsyms.LayoutsInfer
	default:
		return usagef("--layouts %q: want auto, btf or infer", l.mode)
	}
	if l.btf != "" && l.table != "" {
		return usagef("--btf and --layout: give one")
	}
	switch {
	case l.btf != "":
		src, err := btflayout.Open(l.btf)
		if err != nil {
			return fmt.Errorf("--btf %s: %w", l.btf, err)
		}
		opt.Layout = src
	case l.table != "":
		f, err := os.Open(l.table)
		if err != nil {
			return fmt.Errorf("--layout: %w", err)
		}
		defer f.Close()
		t, err := btflayout.ParseTable(f, l.table)
		if err != nil {
			return fmt.Errorf("--layout %s: %w", l.table, err)
		}
		opt.Layout = t
	}
	return nil
}

// describeLayouts is info's account of the struct layouts and the module
// list head: how each was found and, when inferred, every offset with its
// evidence.
func describeLayouts(s *kdumpsyms.Session) (string, string) {
	src, how, err := s.Layouts()
	if err != nil {
		return "unavailable: " + err.Error(), ""
	}
	if strings.HasPrefix(how, "given: ") {
		// Evidence that layouts from a file fit this dump (Set.CheckFit).
		if set, _ := s.Modules(); set != nil {
			how += fmt.Sprintf(" (checked against the %d modules it read: region sizes, text bases, taints, refcounts, symbol tables)", len(set.Modules()))
		}
	}
	var detail strings.Builder
	if inf, ok := src.(*btflayout.Inferred); ok {
		_ = btflayout.WriteTable(&detail, inf, inf.Want())
		for _, e := range inf.Evidence() {
			fmt.Fprintf(&detail, "# %s\n", e)
		}
	}
	if h, hhow, err := s.ModuleListHead(); err == nil {
		fmt.Fprintf(&detail, "module list head %#x: %s\n", h, hhow)
	}
	return how, detail.String()
}
