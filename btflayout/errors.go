package btflayout

import (
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

var (
	// ErrNotFound means the source has no struct, field or enum of the name
	// asked for. The source is fine; it describes a kernel without it.
	ErrNotFound = memory.Classed("not found in layout source", vmcoreinfo.ErrMissingInfo)

	// ErrNoBTF means the dump carries no vmlinux BTF: the kernel was built
	// without CONFIG_DEBUG_INFO_BTF, or the __start_BTF/__stop_BTF symbols
	// are unknown. Supply a vmlinux with debug info, a BTF file, or a layout
	// table instead.
	ErrNoBTF = memory.Classed("no vmlinux BTF in the dump (supply the kernel's BTF or a layout table: kdump-syms --btf FILE or --layout FILE)", vmcoreinfo.ErrMissingInfo)

	// ErrCorrupt means the BTF blob, DWARF or table is malformed: typically
	// this indicates damaged or crafted input.
	ErrCorrupt = memory.Classed("corrupt type information", memory.ErrCorrupt)
)
