// Package diskdump reads makedumpfile's and QEMU's kdump-compressed crash
// dumps (signature "KDUMP   "), including flattened (makedumpfile -F)
// streams and --split sets, as a memory.Reader over physical addresses.
//
// # Format
//
// A kdump-compressed file is a sequence of blocks of block_size bytes (the
// target's page size). Block 0 holds the disk_dump_header: signature,
// header_version, the kernel's utsname, a timestamp, status flags,
// block_size, the sub-header size in blocks, the bitmap size in blocks and
// max_mapnr, the number of page frames. Its integers are in the target's
// byte order and its layout depends on the writer's word size (struct
// timeval and the tasks array are two longs), and neither is recorded, so
// Open tries little- and big-endian, 64- and 32-bit, and keeps the one
// combination whose fields are consistent: a power-of-two block size,
// bitmaps inside the file and large enough for max_mapnr, sub-header
// offsets inside the file. utsname.machine picks the order to try.
//
// Block 1 holds the kdump_sub_header, whose fields grew with
// header_version: phys_base (0), dump_level (1), the split pfn range (2),
// the VMCOREINFO offset and size (3), the ELF note blob (4), eraseinfo
// (5), and 64-bit max_mapnr and split range (6). 32-bit writers align its
// 64-bit fields to 4 (i386, QEMU) or 8 (ARM32) bytes; the ARM layout is
// chosen for "arm*" machines or when VMCOREINFO does not land inside the
// sub-header blocks under the packed layout.
//
// Two bitmaps follow, of one bit per page frame (LSB first): the first
// marks frames that exist, the second frames saved in the dump. Only the
// second is read. Then comes one 24-byte page_desc per set bit of the
// second bitmap (file offset, stored size, codec flags), in pfn order, so
// the descriptor of a saved pfn is found by its rank in the bitmap; the
// package keeps a prefix popcount every 512 bits to compute it in constant
// time. Page data is raw (exactly one block) or one zlib stream, LZO1X
// block, snappy block or zstd frame that must decompress to exactly one
// block. All-zero pages share one stored page.
//
// A dump whose writer ran out of space has StatusIncomplete set: pages
// whose descriptor or data was never written read as not saved
// (memory.ErrNotSaved), not as corruption. A split set (--split) is several
// complete files, each holding the descriptors and data of one pfn range
// from its sub-header; Open takes them in any order, and a pfn in a file
// that was not given reads as not saved.
//
// A flattened stream is a 4096-byte header ("makedumpfile", type 1,
// version 1, big-endian) and then records of {target offset, size, data}
// (big-endian int64s) ending with offset -1: the writes of a normal dump,
// in any order, possibly overwriting each other. The package indexes the
// records in one pass, keeps the last writer of every byte, and reads the
// data in place; nothing is copied or rewritten.
//
// The old "DISKDUMP" format of the pre-kdump diskdump driver is recognised
// and rejected with errors.ErrUnsupported.
//
// References (for facts only): makedumpfile's diskdump_mod.h and
// IMPLEMENTATION, libkdumpfile's src/kdumpfile/diskdump.c, QEMU's
// dump/dump.c, and crash's diskdump.c.
//
// # Errors
//
// Open and NewDump fail with errors wrapping ErrUnrecognizedFormat when the
// input is not this format, errors.ErrUnsupported for formats recognised
// but not read, and ErrCorrupt (memory.ErrCorrupt) through *FormatError for
// inconsistent data. Reads fail with a *memory.FaultError naming the
// physical address; its cause is memory.ErrNotSaved for absent pages and a
// *FormatError naming the pfn and file offset for pages that cannot be
// decoded. A bad page fails only reads of that page.
//
// # Security
//
// The package is built for untrusted input and fuzzed (FuzzOpen,
// FuzzFlattened). Every size, count and offset read from a file is checked
// against the file size before it is used: the bitmap cannot be larger than
// the file, the number of page descriptors (the bitmap's popcount) must fit
// in the file, blobs are capped at 64 MiB and the file size, stored pages
// at one block, decompressed pages at exactly one block (zstd frames may
// declare at most an 8 MiB window). Flattened streams are indexed with one
// bounded pass over their record headers. Memory use after Open is the
// second bitmap (one bit per page frame of the range held), its rank table
// (1/8 of that), the flattened record index, and a cache of 64 pages.
// Nothing panics on bad input.
package diskdump
