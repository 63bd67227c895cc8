package memimage

// On-disk layout of LiME and AVML range headers (see the package
// documentation).
const (
	headerSize = 32
	// limeMagic is LiME's LIME_MAGIC (src/lime.h), written in the byte
	// order of the machine that ran the module.
	limeMagic   = 0x4C694D45
	limeVersion = 1
	// avmlMagic is AVML's AVML_MAGIC (src/image.rs), always little-endian.
	avmlMagic   = 0x4C4D5641
	avmlVersion = 2
	// avmlTrailerSize is the u64 after each AVML block's snappy stream:
	// the stream's length in bytes.
	avmlTrailerSize = 8
)

// The snappy framing format (github.com/google/snappy,
// framing_format.txt), as AVML writes it per block.
const (
	chunkHeaderSize = 4 // type byte, 24-bit little-endian length
	chunkCRCSize    = 4 // masked CRC-32C of the uncompressed data
	// maxChunkData is the most a compressed or uncompressed data chunk may
	// decompress to.
	maxChunkData = 65536
	// maxChunkBody is the longest body (after the CRC) a compressed chunk
	// of maxChunkData bytes can need: snappy.MaxEncodedLen(65536).
	maxChunkBody = 32 + maxChunkData + maxChunkData/6

	chunkCompressed   = 0x00
	chunkUncompressed = 0x01
	chunkStreamID     = 0xff
	// Types 0x02-0x7f are reserved and unskippable, 0x80-0xfe skippable
	// (0xfe is padding).
	chunkLastUnskippable = 0x7f

	streamID = "sNaPpY"
)

// cachedChunks is how many decompressed AVML chunks a File keeps: 512 KiB,
// enough for the page-table walks and table reads of symbol decoding to
// hit the cache.
const cachedChunks = 8
