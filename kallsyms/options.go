package kallsyms

import (
	"encoding/binary"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Options tune Load. The zero value takes everything from the dump.
type Options struct {
	// Target is the kernel's machine. Unlike the other decoders, Load
	// finds what Target leaves unknown (zero) in the dump itself:
	//   - ByteOrder: big-endian when VMCOREINFO names s390x, otherwise
	//     the order that makes token_index valid;
	//   - PtrSize: 8 when VMCOREINFO names a 64-bit architecture or
	//     SYMBOL(_stext) lies above 4 GiB, otherwise 4;
	//   - PageSize, the granule a scan skips by when memory is missing:
	//     VMCOREINFO's PAGESIZE, else 4096.
	// A field that is set but that no kernel has (a pointer size of 2) is
	// an error wrapping errors.ErrUnsupported.
	Target memory.Target

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

// checkKnown checks the fields of t that are set (Load finds the others):
// Check, with the unknown ones given values that pass it.
func checkKnown(t memory.Target) error {
	return t.Or(memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}).Check()
}
