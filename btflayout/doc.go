// Package btflayout answers "where is field F of struct S" for the kernel
// that wrote a dump, from whichever description of its types is at hand:
//
//   - the vmlinux BTF inside the dump itself (the .BTF section of the kernel
//     image, between the __start_BTF and __stop_BTF symbols; present on
//     kernels built with CONFIG_DEBUG_INFO_BTF, v5.2+), see [FromMemory];
//   - a file the user supplies: a raw BTF blob (/sys/kernel/btf/vmlinux), or
//     a vmlinux ELF with a .BTF section or DWARF debug info, see [Open];
//   - an explicit table of offsets written by hand or by [WriteTable], see
//     [ParseTable] for its format.
//
// Every source implements [Source]. A [Struct] lists its fields flattened:
// members of anonymous structs and unions appear under their own names with
// offsets from the start of the outer struct, as C lets code name them.
// Offsets are in bytes; bitfields also carry their bit offset and width.
//
// Structs such as struct module are __randomize_layout: with
// CONFIG_RANDSTRUCT their field order differs per build, so offsets must
// come from the dump's own kernel and never from a table of guesses.
//
// BTF is parsed with github.com/cilium/ebpf/btf, which decodes types
// lazily; DWARF with debug/dwarf.
//
// # Security
//
// Built for untrusted input and fuzzed: the BTF size read from a dump is
// checked against [MaxBTFSize] before anything is allocated, and a malformed
// table or blob is an error wrapping [ErrCorrupt], never a panic.
package btflayout
