// Package symfinder is the symbol layer of kdump-syms: the [Symbol] callers
// receive, the [Finder] interface every symbol source implements, the
// immutable struct-of-arrays [Index] the built-in sources build, and the
// [Chain] that asks an ordered list of named finders, after drgn's Symbol
// Finder API.
//
// A caller plugs its own source in by implementing Finder (or wrapping a
// function in [FinderFunc]) and adding it to a Chain. Finding nothing is
// never an error for a finder; only the Chain turns "no finder had it" into
// a [NotFoundError] (it matches [ErrNotFound]), which names the finders
// that failed; [Chain.Failures] keeps each one's error once, so that a
// caller reports every root cause once.
//
// Lookups by address follow the kernel's own rules where a source sets
// them (Builder.SetExtents, KernelRanges): a symbol covers up to the next
// one, only inside the ranges the kernel answers in (vmlinux's
// is_ksym_addr, a module's memory regions), so that an address no symbol
// covers is not found and the chain's next finder gets it.
//
// This package imports nothing else of kdump-syms.
package symfinder
