package btflayout

import "errors"

var (
	// ErrNotFound means the source has no struct, field or enum of the name
	// asked for. The source is fine; it describes a kernel without it.
	ErrNotFound = errors.New("not found in layout source")

	// ErrNoBTF means the dump carries no vmlinux BTF: the kernel was built
	// without CONFIG_DEBUG_INFO_BTF, or the __start_BTF/__stop_BTF symbols
	// are unknown. Supply a vmlinux with debug info, a BTF file, or a layout
	// table instead.
	ErrNoBTF = errors.New("no vmlinux BTF in the dump (supply the kernel's BTF or a layout table: kdump-syms --btf FILE or --layout FILE)")

	// ErrCorrupt means the BTF blob, DWARF or table is malformed: typically
	// this indicates damaged or crafted input.
	ErrCorrupt = errors.New("corrupt type information")
)
