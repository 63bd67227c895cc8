// Package kallsyms finds and decodes the core kernel's compressed symbol
// tables (kallsyms) in a crash dump, without vmlinux or debug information.
//
// # The tables
//
// scripts/kallsyms emits, into .rodata, one unit holding:
//
//   - kallsyms_num_syms: the symbol count (u32 since v4.20, unsigned long
//     before);
//   - kallsyms_names: one entry per symbol in address order, a length
//     prefix (one byte; from v6.1 a two-byte ULEB128 for lengths above
//     0x7f) followed by that many code bytes;
//   - kallsyms_markers: the offset in names of every 256th entry (u32
//     since v4.20, unsigned long before);
//   - kallsyms_token_table and kallsyms_token_index: 256 NUL-terminated
//     strings and their u16 offsets; code byte c expands to string c;
//   - the addresses, in one of four encodings (see [Encoding]): absolute
//     kallsyms_addresses, 32-bit kallsyms_offsets from
//     kallsyms_relative_base (with or without absolute per-CPU symbols), or
//     from v7.0 offsets relative to each entry's own place;
//   - from v6.2 (and 6.1.y stable) kallsyms_seqs_of_names: 3-byte
//     big-endian indexes of the symbols in name order.
//
// The first character of an expanded entry is the nm(1) type letter
// /proc/kallsyms prints, the rest is the name. The tables follow each
// other with only alignment padding between them, in an order that changed
// in v6.2, v6.4 and v7.0 (docs/formats.md §1.2).
//
// # Locating
//
// Kernels from v6.0 export most table addresses in VMCOREINFO; the markers
// and seqs_of_names never are, and are derived from the layout and
// checked. Older kernels are found by scanning the kernel image for the
// token table (the run "0\x001\x00…9\x00"), its index, then walking back to
// markers, names and num_syms (docs/formats.md §7); a scan gives up with
// ErrNotFound after 1024 such runs or 8 token tables that fail, so an image
// full of decoys costs milliseconds, not hours. Nothing is decided from the
// kernel version alone: every candidate layout, name-length rule and
// address encoding is tried and kept only when it validates (names land on
// every marker and end where the tables end; the decoded _stext equals
// VMCOREINFO's; other VMCOREINFO symbols agree).
//
// [Load] expands everything into a [symfinder.Index]; with Options.Lazy it
// returns a [Lazy] finder instead, which reads only the address table and
// the markers up front and decodes names on demand. Both give identical
// answers. A whole expansion reads the names once, sizes the expanded
// names exactly from the token lengths, and expands them into that one
// buffer on the calling goroutine.
//
// # Security
//
// This package is built for untrusted input and fuzzed. Counts read from
// the dump are checked against the geometry of the tables around them
// before anything is sized from them, and tables are read in bounded
// chunks, so a false num_syms fails on missing memory rather than
// allocating it.
package kallsyms
