// Package export writes the symbols recovered from a dump as files other
// tools read: ELF symbol files for gdb (symbol-file, add-symbol-file), nm,
// readelf and objdump.
//
// WriteELF writes one ELF file of type ET_EXEC whose .symtab holds the
// given symbols at their runtime addresses, each with its size (st_size:
// the symbol table's own size where the source recorded one, else the
// kernel's extent up to the next symbol), its type (STT_FUNC for the text
// letters t, T, w and W when in code, STT_OBJECT for the others,
// STT_NOTYPE for absolute symbols) and its binding (upper case STB_GLOBAL,
// lower case STB_LOCAL, W and V STB_WEAK). The sections are SHT_NOBITS:
// the file holds names and addresses, no memory, so it stays small and
// nm prints the letter of the section kind (t for code, b for the rest)
// rather than the kernel's d or r. Sections are either given (a module's
// memory regions at their load addresses) or derived from the symbols (a
// vmlinux: one section per run of code or non-code symbols in address
// order). A symbol in no section is SHN_ABS, at its address.
//
// WriteDir writes vmlinux.syms and one MODULE.ko.syms per module into a
// directory: what kdump-syms export --format elf writes.
//
// The package reads no dump: it takes symbols (symfinder.Symbol) and the
// modules' regions (modsyms.Region) from its caller.
package export
