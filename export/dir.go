package export

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Module is one module's symbol file input: its name, its memory as
// sections, its symbols.
type Module struct {
	Name     string
	Sections []Section
	Symbols  []symfinder.Symbol
}

// sectionNames names the v6.4+ mem[] regions as the sections the module's
// .ko has there.
var sectionNames = map[string]string{
	"MOD_TEXT":          ".text",
	"MOD_DATA":          ".data",
	"MOD_RODATA":        ".rodata",
	"MOD_RO_AFTER_INIT": ".data..ro_after_init",
	"MOD_INIT_TEXT":     ".init.text",
	"MOD_INIT_DATA":     ".init.data",
	"MOD_INIT_RODATA":   ".init.rodata",
}

// ModuleSections returns a module's memory regions as sections at their
// load addresses: a mem[] region (v6.4+) as one section named after the
// part of the .ko it holds, a layout region (before v6.4) as its text
// (the first TextSize bytes) and the rest. Empty regions (init memory
// after init) are left out.
func ModuleSections(regions []modsyms.Region) []Section {
	var out []Section
	for _, r := range regions {
		if r.Size == 0 {
			continue
		}
		name, ok := sectionNames[r.Name]
		if !ok {
			name = "." + strings.ToLower(r.Name)
		}
		switch {
		case r.TextSize >= r.Size:
			out = append(out, Section{Name: name, Base: r.Base, Size: r.Size, Exec: true})
		case r.TextSize == 0:
			ro := r.Name == "MOD_RODATA" || r.Name == "MOD_INIT_RODATA" || r.Name == "MOD_RO_AFTER_INIT"
			out = append(out, Section{Name: name, Base: r.Base, Size: r.Size, ReadOnly: ro})
		default:
			out = append(out,
				Section{Name: name + ".text", Base: r.Base, Size: r.TextSize, Exec: true},
				Section{Name: name + ".data", Base: r.Base + r.TextSize, Size: r.Size - r.TextSize})
		}
	}
	return out
}

// VmlinuxFile and ModuleSuffix name the files WriteDir writes.
const (
	VmlinuxFile  = "vmlinux.syms"
	ModuleSuffix = ".ko.syms"
)

// ErrModuleName means a module's name is not a plain file name (empty,
// ".", "..", or with a path separator or NUL): WriteDir does not write
// that module.
var ErrModuleName = errors.New("name is not a file name")

// ErrNameClash means two modules given to WriteDir have the same name:
// the first is written, the second is not.
var ErrNameClash = errors.New("name used twice")

// WriteDir writes vmlinux.syms (the vmlinux symbols, sections derived from
// them) and one NAME.ko.syms per module into dir, creating dir if needed
// and replacing files of those names. It returns the paths written. A
// module name that is not a plain file name (empty, ".", "..", or with a
// path separator or NUL: the name comes from the dump) is an error
// wrapping ErrModuleName, and a second module of a name one wrapping
// ErrNameClash; the other files are still written and the errors joined
// (errors.Join), one per module, each naming it.
func WriteDir(dir string, t Target, vmlinux []symfinder.Symbol, mods []Module) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	var errs []error
	write := func(name string, syms []symfinder.Symbol, secs []Section) {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		err = WriteELF(f, t, syms, secs)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("export: %s: %w", p, err))
			return
		}
		written = append(written, p)
	}
	write(VmlinuxFile, vmlinux, nil)
	seen := map[string]bool{}
	for _, m := range mods {
		if m.Name == "" || m.Name == "." || m.Name == ".." || strings.ContainsAny(m.Name, "/\\\x00") {
			errs = append(errs, fmt.Errorf("export: module %q: %w", m.Name, ErrModuleName))
			continue
		}
		if seen[m.Name] {
			errs = append(errs, fmt.Errorf("export: module %q: %w", m.Name, ErrNameClash))
			continue
		}
		seen[m.Name] = true
		secs := m.Sections
		if secs == nil {
			secs = []Section{} // no regions: every symbol absolute
		}
		write(m.Name+ModuleSuffix, m.Symbols, secs)
	}
	return written, errors.Join(errs...)
}
