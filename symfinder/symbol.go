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
	// Size is the symbol's extent in bytes as the kernel defines it, the
	// size its %pS prints: up to the next symbol, within the range the
	// kernel answers lookups in (see Builder.SetExtents); the recorded
	// size where a source has no such rule (BPF images, trampolines). 0
	// means unknown. Containment is tested as a-Addr < Size, which cannot
	// overflow.
	Size uint64
	// SizeDerived reports that Size was not recorded but derived from the
	// next higher symbol address, as the kernel's own
	// kallsyms_lookup_size_offset does.
	SizeDerived bool
	// ELFSize is the size the symbol table recorded (st_size of a module's
	// or a vmlinux's symtab, the exact length of a BPF image); 0 unknown.
	// Size is the kernel's extent, which runs on to the next symbol.
	ELFSize uint64
	// Kind is the nm(1) type letter /proc/kallsyms prints: T, t, D, d, ...
	Kind Kind
	// Module names the module the symbol belongs to, "" for vmlinux; pseudo
	// modules such as "bpf" and "__builtin__ftrace" are named as
	// /proc/kallsyms names them.
	Module string
	// Finder names the finder that answered, set by a Chain (a finder
	// itself leaves it empty): where several sources overlap (the dump's
	// kallsyms and a System.map file), the source of each answer.
	Finder string
}

// Kind is a symbol's nm(1) type letter: 'T' global text, 't' local text,
// 'D'/'d' data, 'R'/'r' read-only data, 'B'/'b' bss, 'A'/'a' absolute, 'W'
// weak, and so on. It prints as its letter.
type Kind byte

// String returns the letter.
func (k Kind) String() string { return string(rune(k)) }

// IsZero reports the zero Symbol, which is no symbol: what a failed lookup
// returns.
func (s Symbol) IsZero() bool { return s == Symbol{} }

// Contains reports whether addr lies in [s.Addr, s.Addr+s.Size). A symbol of
// unknown size contains only its own address.
func (s Symbol) Contains(addr uint64) bool {
	if s.Size == 0 {
		return addr == s.Addr
	}
	return addr-s.Addr < s.Size
}

// String describes s: its name, type letter, address and size, and its
// module: "vfs_write (T) 0xffffffff81370620/0x440", "xfs_file_write_iter
// (t) 0xffffffffc0568380/0x120 [xfs]". The zero Symbol is "<no symbol>".
func (s Symbol) String() string {
	if s.IsZero() {
		return "<no symbol>"
	}
	str := fmt.Sprintf("%s (%c) %#x/%#x", s.Name, s.Kind, s.Addr, s.Size)
	if s.Module != "" {
		str += " [" + s.Module + "]"
	}
	return str
}

// Format formats addr relative to s like the kernel's %pS:
// "name+0xoff/0xsize" followed by " [module]" for module symbols. The
// zero Symbol formats as "?", never as a hit.
func (s Symbol) Format(addr uint64) string {
	if s.IsZero() {
		return "?"
	}
	str := fmt.Sprintf("%s+%#x/%#x", s.Name, addr-s.Addr, s.Size)
	if s.Module != "" {
		str += " [" + s.Module + "]"
	}
	return str
}
