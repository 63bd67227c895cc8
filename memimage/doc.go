// Package memimage reads physical memory images that are not crash dumps:
// LiME files, AVML's compressed images, and raw images.
//
// A LiME file (github.com/504ensicsLabs/LiME, "lime" format) is a sequence
// of ranges, each a 32-byte header followed by the range's bytes:
//
//	u32 magic     0x4C694D45 ("EMiL" on disk in little-endian, "LiME" in big-endian)
//	u32 version   1
//	u64 s_addr    first physical address of the range
//	u64 e_addr    last physical address of the range (inclusive)
//	u8  reserved[8]
//
// The module writes the header as a native C struct, so a big-endian
// machine writes it big-endian; the magic tells the byte order, and every
// header of a file must use the same one. LiME writes one range per
// "System RAM" resource of /proc/iomem, in ascending order; this package
// accepts the ranges in any order as long as none overlaps another.
//
// An AVML image (github.com/microsoft/avml, its "compressed" output, the
// default of avml-convert) uses the same header with magic 0x4C4D5641
// ("AVML" on disk, always little-endian) and version 2. The range's bytes
// are a snappy framing-format stream (stream identifier, then compressed
// or uncompressed chunks of at most 64 KiB with a masked CRC-32C of the
// uncompressed bytes), followed by a little-endian u64 giving the length
// of that stream. AVML splits each range into blocks of at most 16 MiB
// and leaves out a block that is all zeros: such memory reads as not
// saved here, as any address outside every range does. The chunks are
// indexed when the file is opened (their headers only), and a read
// decompresses the chunks it touches, keeping the last few.
//
// A raw image (LiME's "raw" and "padded" formats, dd of /dev/mem or
// /dev/crash, QEMU's pmemsave, a hypervisor's memory file) has no header
// at all: NewRaw maps it according to a layout the caller gives, the
// physical ranges stored one after the other in the file.
//
// None of these formats records the architecture, the page size or
// VMCOREINFO: package vmcore finds the VMCOREINFO note in the memory and
// the architecture from it.
//
// # Errors
//
// Malformed input is a *FormatError naming the file offset and, where it
// applies, the range (by index, from 0, and its addresses); it matches
// memory.ErrCorrupt, io.ErrUnexpectedEOF when the file ends too early,
// ErrOverlap when two ranges overlap and ErrBadBlock when an AVML block
// does not decode. A file that starts with no known magic is
// ErrUnrecognizedFormat. Reads outside every range fail with a
// *memory.FaultError wrapping memory.ErrNotSaved; a chunk that does not
// decompress, or whose CRC does not match, with one wrapping a
// *FormatError that matches ErrBadBlock.
//
// # Security
//
// Built for untrusted input and fuzzed (FuzzNewFile, FuzzNewRaw). Every
// header is checked against the file size before anything is read or
// allocated: ranges that run backwards, run past the end of the file or
// overlap another are refused by index; an AVML chunk must lie inside the
// file, declare at most 64 KiB and decompress to exactly what it declared,
// and the chunks of a block must add up to exactly the range's size and
// take exactly the length the block's trailer states. The index grows
// with the chunks actually found in the file (at least 8 bytes each), so
// no allocation is sized by a header field.
package memimage
