// Package vmcore opens Linux kernel crash dumps of every supported format
// behind one type, Dump: the entry point most users of kdump-syms need.
//
// Open probes each file by content, never by name:
//
//   - an xz, zstd or gzip wrapper (magic bytes fd 37 7a 58 5a 00,
//     28 b5 2f fd, 1f 8b) is decompressed once into a temporary file in
//     Options.TempDir (os.TempDir by default), which on Linux has no name
//     (O_TMPFILE) and so is gone when the process ends however it ends;
//     with Options.CacheDir it is kept there instead, under the SHA-256 of
//     the wrapped file's content, for the next Open of the same content
//     (complete or absent, least recently used removed beyond
//     Options.CacheMaxBytes); one level of wrapping is accepted;
//   - an ELF core (/proc/vmcore, /proc/kcore, makedumpfile -E, QEMU
//     dump-guest-memory) is read by package elfcore;
//   - a kdump-compressed file (signature "KDUMP   "), its flattened stream
//     form (header "makedumpfile") and split sets of several files are read
//     by package diskdump;
//   - a LiME file (magic "EMiL" or "LiME") or an AVML compressed image
//     (magic "AVML") is read by package memimage; a raw physical memory
//     image has no header and is read only when Options.Raw gives its
//     layout. None of them records VMCOREINFO or the architecture: the note
//     is found by the memory scan below, the architecture from VMCOREINFO
//     or Options.Arch.
//
// Openers are tried in turn until one returns something other than
// ErrUnrecognizedFormat, as delve does for core files; when none claims a
// file the error wraps ErrUnrecognizedFormat.
//
// # VMCOREINFO
//
// The kernel's VMCOREINFO text is taken from the container when it carries
// one: the ELF note, or the kdump header's copy. A QEMU dump of a guest
// without -device vmcoreinfo (and every s390x and pseries QEMU dump) has none; Open then
// looks for the note in guest memory. On s390x it first follows the lowcore
// pointer at physical 0xe0c; elsewhere, and when that fails, it scans saved
// physical memory in ascending address order, in 1 MiB chunks, for the note
// header (namesz 11, type 0, in either byte order) followed by
// "VMCOREINFO\0\0OSRELEASE=", and stops at the first candidate whose text
// parses. The scan reads at most Options.ScanLimit bytes of saved memory
// (DefaultScanLimit, 16 GiB, by default: the note is allocated early in boot
// and has been found in the first 32 MiB of every guest examined).
// InfoSource says where the text came from.
//
// A container's copy is checked, not trusted (InfoCheck): its OSRELEASE
// must match init_uts_ns; when it does not, or with Options.CheckInfo, the
// note in memory is compared with it, and when they differ the one that
// validates (also by Options.ValidateInfo) is used. Options.VMCOREINFO
// replaces the text.
//
// A dump whose VMCOREINFO does not parse still opens: physical reads do not
// need it. Info then returns nil and InfoErr the parse error, while
// VMCOREINFO still returns the raw text.
//
// # Architecture
//
// Arch combines the container's machine (ELF e_machine, or the kdump
// header's utsname machine) with what VMCOREINFO's architecture-only lines
// say. When both name an architecture and they differ, Open fails with an
// error wrapping memory.ErrCorrupt: reading the dump with the wrong page
// table format would produce garbage rather than errors.
//
// For the 64-bit PowerPC family the container's byte order is not taken as
// the kernel's (QEMU 7.2 writes a ppc64le guest's ELF and kdump headers
// big-endian): a VMCOREINFO note found in memory was written by the kernel,
// and its byte order names the architecture, ppc64le or ppc64; a kdump
// header's "ppc64le" or "ppc64" names it too. CPUs' PRSTATUS notes are
// read in the container's own order.
//
// # Security
//
// Built for untrusted input and fuzzed (FuzzOpen). Decompression is capped
// at Options.MaxDecompressedSize, the VMCOREINFO scan at ScanLimit, and
// every container parser checks sizes against the file before allocating.
package vmcore
