// Package vtop translates Linux kernel virtual addresses to physical ones,
// offline, for the architectures kdump-syms reads dumps of, and reads kernel
// virtual memory through that translation.
//
// [New] builds a [Translator] from a [Config]: the dump's physical memory,
// its VMCOREINFO and the architecture's byte order, pointer size and page
// size. Each architecture has exact linear shortcuts ("fast paths") for the
// ranges where the kernel maps memory linearly, and a page-table walk from
// the kernel's top-level table for everything else (vmalloc, modules, BPF):
//
//   - x86_64: the kernel text map (__START_KERNEL_map + phys_base, within
//     KERNEL_IMAGE_SIZE), the direct map (page_offset_base, discovered by
//     walking the page tables because VMCOREINFO does not carry it), and a
//     4- or 5-level walk of init_top_pgt with 1 GiB and 2 MiB pages and the
//     SME mask stripped from entries. docs/formats.md §3.5, §4.1.
//   - arm64: the kernel image (va − kimage_voffset, from _text where the
//     page tables map the image head, else from _stext), the linear map
//     (PHYS_OFFSET, before and after the v5.4 VA-space flip) and a walk of
//     swapper_pg_dir for 4K/16K/64K granules and 39..52-bit VAs, with block
//     mappings and 52-bit output addresses. docs/formats.md §4.2.
//   - i386: the lowmem linear map at PAGE_OFFSET (0xC0000000 unless the
//     page tables say otherwise) and a 2-level (non-PAE) or 3-level (PAE)
//     walk. docs/formats.md §4.3.
//   - arm (32-bit ARMv7): the kernel image in the linear map at
//     PAGE_OFFSET (PAGE_OFFSET and PHYS_OFFSET, which VMCOREINFO does not
//     carry, confirmed by the page tables, PHYS_OFFSET's candidates from
//     the dump's saved ranges) and a walk of swapper_pg_dir in the
//     short-descriptor format (sections, supersections, small and large
//     pages) or, with CONFIG_ARM_LPAE, the long-descriptor format (1 GiB
//     and 2 MiB blocks, 40-bit output addresses). docs/formats.md §4.6.
//   - s390x: the kernel image as the kernel maps it (identity before
//     KERNELOFFPHYS existed; va − KERNELOFFSET + KERNELOFFPHYS after), the
//     identity map of memory up to high_memory (at 0, or at IDENTITYBASE
//     from ≈v6.10), and a DAT walk of swapper_pg_dir: region-first,
//     -second and -third tables (the top one's type read from its
//     entries), segment and page tables, with 1 MiB and 2 GiB frames.
//     docs/formats.md §4.4.
//   - ppc64le and ppc64 (Book3S-64): the linear map at PAGE_OFFSET
//     (0xc000000000000000, holding the kernel image) up to VMALLOC_START,
//     and a walk of swapper_pg_dir, the kernel's Linux page tables
//     (big-endian entries), for everything above: the radix geometry for
//     4 KiB and 64 KiB pages, with 2 MiB and 1 GiB leaves, and the hash
//     MMU's, whose Linux tables have the same entry format (its hashed
//     page table is not read). docs/formats.md §4.5.
//   - riscv64: the kernel image (va − va_kernel_pa_offset, from the 2 MiB
//     boundary below _stext where the walk agrees), the linear map
//     (PAGE_OFFSET and phys_ram_base, KERN_VIRT_SIZE long) and an Sv39,
//     Sv48 or Sv57 walk of swapper_pg_dir (the mode from VA_BITS) with
//     superpages at every level and Svnapot 64 KiB pages.
//     docs/formats.md §4.7.
//
// Other architectures (32-bit PowerPC, ...) fail with an error wrapping
// errors.ErrUnsupported.
//
// A fast path is used only where it is exact: it gives the same answer as
// the walk wherever the walk succeeds. The one deliberate difference is the
// x86_64 direct map, which also answers for holes in physical memory that
// the kernel leaves unmapped; reading such an address then fails in the
// physical reader instead of in the walk.
//
// Translations are cached per page in a small direct-mapped TLB, so reading
// a page piece by piece walks once. A [Translator] is therefore not safe
// for concurrent use; give each goroutine its own.
//
// # Errors
//
// A read or translation that fails returns a *memory.FaultError whose Addr
// is the kernel virtual address, Space is "kernel virtual" and Op names the
// step that failed ("pud entry at 0x...", "pmd entry 0x... not present",
// "read at physical 0x..."). Its cause wraps ErrNotMapped for non-present
// entries and non-canonical addresses, memory.ErrNotSaved when a page table
// or the data page is missing from the dump, and vmcoreinfo.ErrMissingInfo
// when VMCOREINFO lacks what the translation needs.
//
// # Security
//
// Built for untrusted input and fuzzed (FuzzWalk): page tables may point
// anywhere, hold loops or garbage. A walk reads at most one entry per
// paging level, so it always ends; entries pointing outside the dump fail
// with the physical reader's error; nothing panics.
package vtop
