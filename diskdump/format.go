package diskdump

import "github.com/kdumpsyms/kdumpsyms/internal/kdumpfmt"

// On-disk layout of kdump-compressed files and flattened streams. All
// disk_dump_header and kdump_sub_header integers are in the target's byte
// order; the flattened framing is always big-endian.

const (
	sigKdump    = kdumpfmt.Signature
	sigDiskdump = "DISKDUMP"
	sigFlat     = "makedumpfile"

	// flatHeaderSize is the size of the flattened stream's header block;
	// records start right after it.
	flatHeaderSize = 4096
	// flatRecordHeader is the size of one record header: offset, size.
	flatRecordHeader = 16
	flatTypeHeader   = 1
	flatVersion      = 1
)

// Header status flags; per-page descriptor flags use the same values for
// the codecs.
const (
	StatusZlib           = 0x1  // DUMP_DH_COMPRESSED_ZLIB
	StatusLZO            = 0x2  // DUMP_DH_COMPRESSED_LZO
	StatusSnappy         = 0x4  // DUMP_DH_COMPRESSED_SNAPPY
	StatusIncomplete     = 0x8  // DUMP_DH_COMPRESSED_INCOMPLETE: writer ran out of space
	StatusExcludedVmemap = 0x10 // DUMP_DH_EXCLUDED_VMEMMAP
	StatusZstd           = 0x20 // DUMP_DH_COMPRESSED_ZSTD

	pageCompressed = StatusZlib | StatusLZO | StatusSnappy | StatusZstd
)

// disk_dump_header field offsets. utsname is six char[65] at 12 in both
// layouts; the 64-bit layout aligns struct timeval (two longs) to 8, the
// 32-bit one to 4.
const (
	offVersion   = kdumpfmt.OffVersion
	offUtsname   = kdumpfmt.OffUtsname
	utsFieldLen  = kdumpfmt.UtsFieldLen
	offMachine   = offUtsname + 4*utsFieldLen
	headerReadSz = 512 // covers both layouts up to tasks[]
)

// The header layouts, stated once in internal/kdumpfmt for the reader
// and the writer (package extract).
type (
	headerLayout = kdumpfmt.HeaderLayout
	subLayout    = kdumpfmt.SubLayout
)

var (
	layout64, layout32         = kdumpfmt.Header64, kdumpfmt.Header32
	sub64, sub32pack, sub32pad = kdumpfmt.Sub64, kdumpfmt.Sub32Packed, kdumpfmt.Sub32Padded
)

// pageDescSize is sizeof(struct page_desc) on every architecture.
const pageDescSize = kdumpfmt.PageDescSize

// Limits on values read from headers. They are generous: anything beyond
// them is not a dump any known writer produces.
const (
	// minBlockSize and maxBlockSize bound block_size, which is the target's
	// page size (4 KiB .. 64 KiB in practice; 256 KiB exists on some
	// PowerPC and Hexagon configurations).
	minBlockSize = 1 << 10
	maxBlockSize = 1 << 20
	// maxHeaderVersion bounds header_version; makedumpfile and QEMU write 6.
	// A much larger value means the byte order guess is wrong.
	maxHeaderVersion = 255
	// likelyMaxVersion is the highest header_version a writer is known
	// to use, with room for a few more; it only ranks failed readings.
	likelyMaxVersion = 16
	// maxBlobSize caps VMCOREINFO, the note blob and eraseinfo (a few KiB
	// in practice; notes grow with the CPU count).
	maxBlobSize = 64 << 20
	// maxParts caps the number of files in a split set.
	maxParts = 1024
)
