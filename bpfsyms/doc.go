// Package bpfsyms reads the kernel's pseudo-module symbols from a dump: the
// lines /proc/kallsyms prints after the modules, for code the kernel
// generated at run time. Each source is its own finder, in the order
// /proc/kallsyms prints them (kernel/kallsyms.c update_iter: core, modules,
// then ftrace, BPF, kprobes):
//
//   - "ftrace" (LoadFtrace): first the names of module init functions that
//     ftrace saved when the init memory was freed (list ftrace_mod_maps of
//     struct ftrace_mod_map, each with a list of struct ftrace_mod_func;
//     printed 'T' with the real module's name), then the dynamically
//     allocated ftrace trampolines (list ftrace_ops_trampoline_list of
//     struct ftrace_ops through ops->list; each with a non-zero
//     ops->trampoline is "ftrace_trampoline", 't', module
//     "__builtin__ftrace", ops->trampoline_size bytes long).
//   - "bpf" (LoadBPF): the kernel's bpf_kallsyms list (kernel/bpf/core.c):
//     JITed programs and subprograms ("bpf_prog_<tag>_<name>"), BPF
//     trampolines ("bpf_trampoline_<key>"), dispatchers
//     ("bpf_dispatcher_<name>") and whatever else the kernel registers;
//     type 't', module "bpf", exactly [start, end). Since v5.7 the list
//     links struct bpf_ksym through ksym.lnode and each entry carries its
//     own name and range; before v5.7 (v4.11+) it links struct bpf_prog_aux
//     through ksym_lnode and the name is computed as the kernel's
//     bpf_get_prog_name does: "bpf_prog_", the 8-byte tag in hex, then "_"
//     and the BTF name of the program's function when it has func_info, else
//     "_" and aux->name when set. The range is then [prog->bpf_func, end of
//     the bpf_binary_header's pages).
//   - "kprobes" (LoadKprobes): one symbol per page of instruction slots,
//     from kprobe_insn_slots.pages and then kprobe_optinsn_slots.pages
//     (struct kprobe_insn_cache, list of struct kprobe_insn_page), named by
//     the cache's sym ("kprobe_insn_page", "kprobe_optinsn_page"), 't',
//     module "__builtin__kprobes", one page (Options.Target.PageSize)
//     long, the range the kernel's __is_insn_slot_addr tests.
//
// Lists are read in the kernel's list order, which is the order
// /proc/kallsyms prints. Two quirks of the kernel are reproduced so that the
// listing is line for line what the guest printed: /proc/kallsyms skips
// entries with an empty name, and ftrace_mod_get_kallsym lists the first
// saved function of each module twice and never the last one (its inner
// loop tests symnum > 1 where symnum > 0 was meant). Lookups by address and
// name see every saved function.
//
// bpf_get_kallsym prints nothing while the net.core.bpf_jit_kallsyms sysctl
// is off; the list is populated regardless, and this package always reads
// it.
//
// Every struct offset comes from a btflayout.Source, by default the vmlinux
// BTF in the dump. The list heads are data symbols (bpf_kallsyms,
// ftrace_ops_trampoline_list, ftrace_mod_maps, kprobe_insn_slots,
// kprobe_optinsn_slots) and so need kallsyms with KALLSYMS_ALL, which
// distribution kernels enable.
//
// # Errors
//
// Each loader fails alone. A missing list-head symbol or struct layout is an
// error wrapping ErrMissingInfo and yields no set. An entry that cannot be
// used (end before start, a range beyond MaxRange, a name without its NUL)
// is left out and reported as an *EntryError; a list that cannot be followed
// (an unreadable node, a wild pointer, a cycle, more than MaxEntries nodes)
// is reported as a *WalkError, and what was read before the break is kept.
// The set's Find yields what was read and then returns these errors.
//
// # Security
//
// Built for untrusted input and fuzzed (FuzzWalk). Every walk is bounded by
// MaxEntries and a visited set, names are read from fixed-size buffers or
// with a cap of KSYM_NAME_LEN bytes, and sizes are checked against
// MaxRange before use, so memory grows only with entries the dump really
// holds.
package bpfsyms
