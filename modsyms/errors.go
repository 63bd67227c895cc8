package modsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

var (
	// ErrCorrupt means a struct module, its symbol table or the module list
	// is inconsistent: a cycle, a count beyond its cap, a name without its
	// NUL, a string offset beyond the string table. Typically this
	// indicates a damaged dump, or layouts that do not belong to the kernel
	// that wrote it.
	ErrCorrupt = memory.Classed("corrupt module data", memory.ErrCorrupt)

	// ErrMissingInfo means a symbol the walk needs (modules, __start_BTF,
	// __stop_BTF) is not known, or the layout source lacks a struct or field
	// every kernel has. The dump is not broken; the information is absent.
	ErrMissingInfo = memory.Classed("missing information", vmcoreinfo.ErrMissingInfo)
)

// ModuleError reports a module that could not be read. Name is the
// module's name when it could be read, Addr the address of its struct
// module.
type ModuleError struct {
	Name string
	Addr uint64
	Err  error
}

func (e *ModuleError) Error() string {
	name := e.Name
	if name == "" {
		name = "?"
	}
	return fmt.Sprintf("modsyms: module %s (struct module at %#x): %v", name, e.Addr, e.Err)
}

// Unwrap returns the cause: typically a *memory.FaultError wrapping
// memory.ErrNotSaved (the module's pages were filtered out of the dump) or
// an error wrapping ErrCorrupt.
func (e *ModuleError) Unwrap() error { return e.Err }

// WalkError reports that the module list could not be followed past Addr
// (a node that cannot be read, a wild pointer, a cycle, or too many
// modules). Modules found before the break, and those found walking the
// list backwards from its head, are still returned.
type WalkError struct {
	Addr uint64 // the list node where the walk stopped
	Err  error
}

func (e *WalkError) Error() string {
	return fmt.Sprintf("modsyms: module list broken at %#x: %v", e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *WalkError) Unwrap() error { return e.Err }

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrCorrupt)
}

// FitError reports struct layouts that do not fit the dump's modules (see
// Set.CheckFit): a BTF or layout table of another kernel. It matches
// ErrCorrupt.
type FitError struct {
	Layout string // the layout source's description
	Module string // the module whose fields give the evidence ("" for the whole list)
	Addr   uint64 // its struct module
	Field  string // the field read, e.g. "mem[MOD_TEXT].size", "taints"
	Why    string // the evidence
}

func (e *FitError) Error() string {
	where := ""
	if e.Module != "" {
		where = fmt.Sprintf("module %s (struct module at %#x): ", e.Module, e.Addr)
	}
	return fmt.Sprintf("modsyms: the struct layouts of %s do not fit this dump: %s%s %s", e.Layout, where, e.Field, e.Why)
}

// Unwrap returns ErrCorrupt.
func (e *FitError) Unwrap() error { return ErrCorrupt }
