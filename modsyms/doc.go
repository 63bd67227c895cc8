// Package modsyms reads the symbols of loaded kernel modules from a dump:
// it walks the kernel's modules list and, for each struct module, reads its
// name, state, memory regions and mod_kallsyms symbol table, and builds one
// *symfinder.Index per module with the type letters, skip rules and order
// of /proc/kallsyms.
//
// # How the kernel keeps module symbols
//
// modules is a list_head in kernel data; each struct module is linked
// through module.list, newest first. /proc/kallsyms (s_show and
// module_get_kallsym) prints, after the core symbols, every module that is
// not MODULE_STATE_UNFORMED in list order and, per module, every index of
// mod->kallsyms->symtab in order, skipping empty names. The type letter is
// typetab[i] (v5.2+), st_size (v5.0–v5.1, see Options.TypeInSize) or
// st_info (before v5.0), upper-cased when the symbol is exported by that
// module (is_exported: a binary search of mod->syms by name, then an
// address check) and lower-cased otherwise. Sizes here are the true
// st_size of each symbol.
//
// The module's memory is mem[MOD_MEM_NUM_TYPES] (struct module_memory,
// v6.4+), core_layout/init_layout (struct module_layout, v4.5–v6.3) or
// module_core/core_size (before v4.5); the symbol table is reached through
// the kallsyms pointer (v4.5+) or lies in struct module itself.
//
// struct module is __randomize_layout, so every offset comes from a
// btflayout.Source: by default the vmlinux BTF inside the dump (located by
// the __start_BTF and __stop_BTF symbols), otherwise DWARF or BTF from a
// file, an explicit table, or layouts inferred from the dump
// (btflayout.Infer) given as Options.Layout. The list head is the modules
// symbol, or Options.Head (found by btflayout.FindModuleList without it).
// With inferred layouts, Module.Unshown says that refcount, users and
// taints are unknown. struct kernel_symbol is
// usually absent from BTF; its layout (place-relative or absolute, with or
// without namespace) is chosen by trying each and keeping the one whose
// name pointers all lead to printable strings in the module.
//
// # Errors
//
// Modules fail alone. A module whose pages were filtered out of the dump
// is listed with Err set (a *ModuleError naming it, wrapping the
// *memory.FaultError), and the others load; Load returns the set with an
// error joining the failures. A broken list (a cycle, a wild pointer, an
// unreadable node) is a *WalkError; the walk then recovers the modules
// beyond the break by following list.prev from the head.
//
// # Security
//
// Built for untrusted input and fuzzed (FuzzWalk). The walk is bounded by
// MaxModules and a visited set; num_symtab, num_syms and string offsets
// are checked against MaxSymbols, MaxExports and MaxStrtab before anything
// is allocated, and large tables are read in chunks so that a lying count
// costs at most one chunk beyond what the dump holds.
package modsyms
