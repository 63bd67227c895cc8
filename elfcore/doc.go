// Package elfcore reads ELF core files that hold a machine's memory: kdump's
// /proc/vmcore, /proc/kcore, makedumpfile -E output and QEMU's
// dump-guest-memory ELF files.
//
// An ELF core is an ELF header, a table of program headers, one or more
// PT_NOTE segments and PT_LOAD segments. Each PT_LOAD maps the file range
// [p_offset, p_offset+p_filesz) to the physical range starting at p_paddr
// and, for most producers, to the virtual range starting at p_vaddr; bytes
// from p_filesz up to p_memsz read as zeros (makedumpfile -E writes
// excluded tails that way). Notes carry the per-CPU registers (CORE,
// NT_PRSTATUS), the kernel's VMCOREINFO text, and producer-specific data
// (QEMU CPU state, s390 register sets).
//
// The package parses the ELF and program headers itself rather than with
// debug/elf, because debug/elf ignores PN_XNUM: when a core has 65535 or
// more program headers (QEMU and makedumpfile write one segment per memory
// block), e_phnum is 0xffff and the real count lives in section header 0's
// sh_info. Program and section headers are found only through e_phoff and
// e_shoff, and e_ehsize is not checked (QEMU ≥ 7.2 writes 8 and puts the
// section headers before the program headers).
//
// # Address spaces
//
// Physical returns a reader over p_paddr. Segments whose p_paddr is
// meaningless do not take part: p_paddr = all ones (/proc/kcore's vmalloc,
// vmemmap and user ranges since v4.11), p_paddr = 0 in a /proc/kcore (before
// v4.11 every kcore segment had 0; a kcore is recognised by its
// NT_TASKSTRUCT note), and ranges that would wrap the address space. When
// several PT_LOADs have p_paddr = 0 and p_vaddr differs, none is trusted.
//
// Virtual returns a reader over p_vaddr when the producer filled it: not when
// every PT_LOAD has p_vaddr = 0 (QEMU before 4.0) or p_vaddr = p_paddr
// (QEMU 4.0 and later without paging, where the field is a copy of the
// physical address rather than a kernel virtual address).
//
// Overlapping segments are resolved the same way in both spaces: the
// segment with the lowest start address wins where ranges overlap, and
// among segments starting at the same address the one that comes first in
// the program header table. Overlaps in real dumps map the same memory
// twice (the kernel-text and RAM segments of /proc/vmcore and /proc/kcore,
// the several virtual mappings of one page in QEMU's paging dumps), so the
// choice does not change the bytes read; it is fixed so that results never
// depend on sort stability. Lookups are a binary search over the resulting
// disjoint ranges, and a read may span adjacent segments.
//
// # Notes
//
// Notes use 4-byte alignment of name and descriptor, even in ELF64, as Linux
// writes them; 8 is used only for a PT_NOTE whose p_align is 8, and the other
// alignment is tried when the first does not parse. Notes are read once at
// open into one buffer, capped at MaxNotesSize. A malformed note stops the
// walk of its segment: the notes before it are kept and the problem is
// reported by NotesErr, so that a dump with a damaged note still opens for
// memory reads.
//
// # Security
//
// This package is built for untrusted input and fuzzed (FuzzELFCore). Every
// count, size and offset is checked against the file size and for overflow
// before it is used; no allocation is sized by a field of the file except
// after that check. A segment whose data lies past the end of the file (a
// truncated dump) opens, and reads of it fail with a *FormatError naming the
// file offset.
package elfcore
