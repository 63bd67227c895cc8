package symfinder

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned by a Chain lookup that no enabled finder answered.
// A Finder never returns it: finding nothing is not an error for a finder.
var ErrNotFound = errors.New("symbol not found")

// Symbol is one symbol as a caller sees it. Symbols are built only when
// returned; indexes keep no per-symbol heap objects.
type Symbol struct {
	Name string
	Addr uint64
	// Size is the symbol's length in bytes; 0 means unknown. Containment is
	// tested as a-Addr < Size, which cannot overflow.
	Size uint64
	// SizeDerived reports that Size was not recorded by the kernel but
	// derived from the next higher symbol address, as the kernel's own
	// kallsyms_lookup_size_offset does.
	SizeDerived bool
	// ELFSize is the size the symbol table recorded (st_size of a module's
	// or a vmlinux's symtab, the exact length of a BPF image); 0 unknown.
	// Size is the kernel's extent, which runs on to the next symbol.
	ELFSize uint64
	// Kind is the nm(1) type letter /proc/kallsyms prints: T, t, D, d, ...
	Kind byte
	// Module names the module the symbol belongs to, "" for vmlinux; pseudo
	// modules such as "bpf" and "__builtin__ftrace" are named as
	// /proc/kallsyms names them.
	Module string
}

// Contains reports whether addr lies in [s.Addr, s.Addr+s.Size). A symbol of
// unknown size contains only its own address.
func (s Symbol) Contains(addr uint64) bool {
	if s.Size == 0 {
		return addr == s.Addr
	}
	return addr-s.Addr < s.Size
}

// String formats s like the kernel's %pS: name+0x0/0xsize [module].
func (s Symbol) String() string { return s.Format(s.Addr) }

// Format formats addr relative to s like the kernel's %pS:
// "name+0xoff/0xsize" followed by " [module]" for module symbols.
func (s Symbol) Format(addr uint64) string {
	str := fmt.Sprintf("%s+%#x/%#x", s.Name, addr-s.Addr, s.Size)
	if s.Module != "" {
		str += " [" + s.Module + "]"
	}
	return str
}
