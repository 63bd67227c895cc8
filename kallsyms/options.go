package kallsyms

import "encoding/binary"

// Options tune Load. The zero value takes everything from VMCOREINFO.
type Options struct {
	// ByteOrder is the kernel's byte order. nil: big-endian when VMCOREINFO
	// names s390x, otherwise decided by which order makes token_index
	// valid.
	ByteOrder binary.ByteOrder
	// PtrSize is the kernel's pointer size, 4 or 8. 0: 8 when VMCOREINFO
	// names a 64-bit architecture or SYMBOL(_stext) lies above 4 GiB,
	// otherwise 4.
	PtrSize int
	// PageSize is the granule a scan skips by when memory is missing. 0:
	// VMCOREINFO's PAGESIZE, else 4096.
	PageSize int

	// Tables overrides table addresses (runtime virtual addresses). When
	// Names, TokenTable and TokenIndex are set they are used instead of
	// VMCOREINFO's and no scan happens; the others are derived as usual
	// unless set.
	Tables TableAddrs

	// ImageStart and ImageEnd bound the scan of the kernel image for
	// kernels whose VMCOREINFO does not export the tables (< v6.0).
	// ImageStart 0: SYMBOL(_stext), else SYMBOL(_text). ImageEnd 0:
	// ImageStart + DefaultScanWindow.
	ImageStart, ImageEnd uint64
	// NoScan makes Load fail with ErrMissingInfo instead of scanning.
	NoScan bool

	// Lazy makes Load return a Lazy finder instead of expanding every name.
	Lazy bool
}

// TableAddrs are table addresses for Options.Tables; 0 means not given.
type TableAddrs struct {
	NumSyms, Names, Markers, TokenTable, TokenIndex uint64
	Offsets, RelativeBase, Addresses, SeqsOfNames   uint64
}
