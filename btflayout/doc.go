// Package btflayout answers "where is field F of struct S" for the kernel
// that wrote a dump, from whichever description of its types is at hand:
//
//   - the vmlinux BTF inside the dump itself (the .BTF section of the kernel
//     image, between the __start_BTF and __stop_BTF symbols; present on
//     kernels built with CONFIG_DEBUG_INFO_BTF, v5.2+), see [FromMemory],
//     or found without those symbols by a validated scan of the kernel's
//     read-only data, see [ScanBTF];
//   - the dump itself without BTF: [Infer] finds each offset the module
//     walk needs by trying every candidate against the modules on the list
//     and keeping the one they all confirm (see infer.go for the evidence),
//     and [FindModuleList] finds that list without the modules symbol by a
//     validated scan of the module areas on vmap_area_list;
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
// Built for untrusted input and fuzzed (FuzzParseTable, FuzzParseBTF,
// FuzzInfer, FuzzScanBTF): the BTF size read from a dump is checked against
// [MaxBTFSize] before anything is allocated, and a malformed table or blob
// is an error wrapping [ErrCorrupt], never a panic. The scans and the
// inference are bounded: lists by a visited set and a count cap (a loop is
// an error), the bytes and candidates of each scan by named caps,
// num_symtab and string offsets by caps checked before a table is read, a
// table's last byte is probed before it is read whole, and names must end
// in a NUL within KSYM_NAME_LEN. An offset that no candidate or more than
// one candidate fits is an error, never a guess.
package btflayout
