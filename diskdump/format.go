package diskdump

// On-disk layout of kdump-compressed files and flattened streams. All
// disk_dump_header and kdump_sub_header integers are in the target's byte
// order; the flattened framing is always big-endian.

const (
	sigKdump    = "KDUMP   "
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
	offVersion   = 8
	offUtsname   = 12
	utsFieldLen  = 65
	offMachine   = offUtsname + 4*utsFieldLen
	headerReadSz = 512 // covers both layouts up to tasks[]
)

type headerLayout struct {
	ptrSize      int
	timestamp    int // struct timeval
	status       int
	blockSize    int
	subHdrSize   int
	bitmapBlocks int
	maxMapnr     int
	currentCPU   int
	nrCPUs       int
	size         int // header up to tasks[]
}

var (
	layout64 = headerLayout{ptrSize: 8, timestamp: 408, status: 424, blockSize: 428, subHdrSize: 432,
		bitmapBlocks: 436, maxMapnr: 440, currentCPU: 456, nrCPUs: 460, size: 464}
	layout32 = headerLayout{ptrSize: 4, timestamp: 404, status: 412, blockSize: 416, subHdrSize: 420,
		bitmapBlocks: 424, maxMapnr: 428, currentCPU: 444, nrCPUs: 448, size: 452}
)

// kdump_sub_header field offsets for the three writer ABIs: 64-bit; 32-bit
// with 64-bit fields aligned to 4 (i386, and QEMU's packed struct); 32-bit
// with 64-bit fields aligned to 8 (ARM32). -1 offsets do not occur: every
// layout has every field; ulong fields are 4 bytes on 32-bit.
type subLayout struct {
	name                                   string
	long                                   int // sizeof(unsigned long)
	physBase, dumpLevel, split             int
	startPFN, endPFN                       int
	offVmcoreinfo, sizeVmcoreinfo          int
	offNote, sizeNote                      int
	offEraseinfo, sizeEraseinfo            int
	startPFN64, endPFN64, maxMapnr64, size int
}

var (
	sub64 = subLayout{name: "64-bit", long: 8, physBase: 0, dumpLevel: 8, split: 12, startPFN: 16, endPFN: 24,
		offVmcoreinfo: 32, sizeVmcoreinfo: 40, offNote: 48, sizeNote: 56, offEraseinfo: 64, sizeEraseinfo: 72,
		startPFN64: 80, endPFN64: 88, maxMapnr64: 96, size: 104}
	sub32pack = subLayout{name: "32-bit packed", long: 4, physBase: 0, dumpLevel: 4, split: 8, startPFN: 12, endPFN: 16,
		offVmcoreinfo: 20, sizeVmcoreinfo: 28, offNote: 32, sizeNote: 40, offEraseinfo: 44, sizeEraseinfo: 52,
		startPFN64: 56, endPFN64: 64, maxMapnr64: 72, size: 80}
	sub32pad = subLayout{name: "32-bit padded", long: 4, physBase: 0, dumpLevel: 4, split: 8, startPFN: 12, endPFN: 16,
		offVmcoreinfo: 24, sizeVmcoreinfo: 32, offNote: 40, sizeNote: 48, offEraseinfo: 56, sizeEraseinfo: 64,
		startPFN64: 72, endPFN64: 80, maxMapnr64: 88, size: 96}
)

// pageDescSize is sizeof(struct page_desc) on every architecture:
// offset i64, size u32, flags u32, page_flags u64.
const pageDescSize = 24

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
	// maxBlobSize caps VMCOREINFO, the note blob and eraseinfo (a few KiB
	// in practice; notes grow with the CPU count).
	maxBlobSize = 64 << 20
	// maxParts caps the number of files in a split set.
	maxParts = 1024
)
