// Package kdumpsyms recovers a Linux kernel's symbols from a crash dump,
// offline, with no vmlinux and no debug information.
//
// [Open] opens a dump (any format package vmcore reads) and returns a
// [Session] whose [symfinder.Chain] holds every symbol source the dump
// supports, each loaded on first use:
//
//   - "kallsyms": the core kernel's symbols, decoded from the compressed
//     kallsyms tables in the dump (package kallsyms);
//   - "modules": every loaded module's symbols, walked from struct module
//     with layouts from the dump's own BTF (package modsyms);
//   - optional file sources named by Options: a vmlinux ELF symtab, a
//     System.map and a saved /proc/kallsyms, shifted by the dump's KASLR
//     offset where they carry link-time addresses.
//
// Callers may add their own finders to the chain, disable or reorder the
// built-in ones by name, and look symbols up by address or name.
//
// The lower layers stand alone for callers that need only part of this:
// vmcore (dumps and memory), kallsyms, modsyms and symfinder. Each decoder
// takes the machine it reads as a [memory.Target] in its Options: the
// dump's is vmcore.Dump.Arch().Target, which a Session passes to all of
// them.
package kdumpsyms
