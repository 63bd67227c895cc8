// Package extract makes small, shareable crash dumps: it decodes a dump the
// way kdump-syms does (VMCOREINFO, page tables, kallsyms, BTF, modules and
// every other finder of the session's chain), records which physical pages
// those decoders read, and writes a new dump holding only those pages.
// The result decodes to the same symbols as the original, in a few MiB
// instead of the machine's memory size, and holds little beyond the
// kernel's own tables (no user data, no page cache).
//
// # How pages are recorded
//
// Record opens the dump with vmcore.Options.WrapPhysical set to a
// memory.Recorder, so every physical read is seen: the page-table walks of
// kernel-virtual translation as well as the data they lead to. Record runs
// the session's stages one after the other and snapshots the recorder
// between them, which attributes each page to the first consumer that read
// it: "vmcoreinfo" (the note in memory, found through the kernel's
// vmcoreinfo_note, or without that symbol by vmcore's scan, so that
// readers scanning memory for it still find it),
// "translation" (the top-level page table and what vtop reads to set up),
// "kallsyms" (the tables, read whole so that eager and lazy decoding both
// work; for kernels before 6.0 the pages a scan read without finding them
// are dropped), "btf" (the pages of [__start_BTF, __stop_BTF)), "modules"
// (struct module, symtabs, strtabs, and the page tables of module
// memory), "finders" (what draining every finder's All reads beyond that:
// BPF, ftrace and kprobes lists), "page tables" (the tables mapping every
// module, BPF and trampoline symbol, so that the extract translates each
// symbol's address) and "keep" (ranges asked for by hand). Each consumer's
// page-table walks are counted with it.
//
// # Writers
//
// WriteELF writes an ELF64 core (notes, one PT_LOAD per run of pages,
// PN_XNUM when there are 65535 or more program headers). WriteKdump writes
// a kdump-compressed file, or the files of a split set, with each page's
// stored blob copied byte for byte from the original (diskdump.RawPage), so
// nothing is decompressed or recompressed; FlatWriter turns a kdump image
// into a flattened (makedumpfile -F) stream. Extract picks the writer that
// keeps the input's container, or ELF when asked.
//
// In a kdump-compressed output the 2nd bitmap lists the kept pages and the
// 1st bitmap the pages the original dump saved: they existed and were
// excluded, now by extract, which is what the 1st bitmap is for. The
// original's own 1st bitmap (which also knows the excluded pages of the
// original) is not exposed by package diskdump; nothing that reads dumps
// needs it.
package extract
