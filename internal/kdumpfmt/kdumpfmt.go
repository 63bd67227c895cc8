// Package kdumpfmt holds the field offsets of the kdump-compressed format's
// disk_dump_header and kdump_sub_header (docs/formats.md §3.3), so that the
// reader (package diskdump) and the writer (package extract) share one
// statement of them.
package kdumpfmt

// Fields at the same place in every layout, and sizes.
const (
	Signature    = "KDUMP   " // disk_dump_header.signature
	OffVersion   = 8          // header_version, an int
	OffUtsname   = 12         // struct new_utsname: six char[UtsFieldLen]
	UtsFieldLen  = 65
	PageDescSize = 24 // struct page_desc: offset i64, size u32, flags u32, page_flags u64
)

// HeaderLayout gives disk_dump_header field offsets. utsname is six
// char[65] at 12 in both layouts; the 64-bit layout aligns struct timeval
// (two longs) to 8, the 32-bit one to 4.
type HeaderLayout struct {
	PtrSize      int
	Timestamp    int // struct timeval
	Status       int
	BlockSize    int
	SubHdrSize   int
	BitmapBlocks int
	MaxMapnr     int
	CurrentCPU   int
	NrCPUs       int
	Size         int // header up to tasks[]
}

// The disk_dump_header layouts of 64-bit and 32-bit writers.
var (
	Header64 = HeaderLayout{PtrSize: 8, Timestamp: 408, Status: 424, BlockSize: 428, SubHdrSize: 432,
		BitmapBlocks: 436, MaxMapnr: 440, CurrentCPU: 456, NrCPUs: 460, Size: 464}
	Header32 = HeaderLayout{PtrSize: 4, Timestamp: 404, Status: 412, BlockSize: 416, SubHdrSize: 420,
		BitmapBlocks: 424, MaxMapnr: 428, CurrentCPU: 444, NrCPUs: 448, Size: 452}
)

// SubLayout gives kdump_sub_header field offsets for one writer ABI. Every
// layout has every field; ulong fields are Long bytes.
type SubLayout struct {
	Name                                   string
	Long                                   int // sizeof(unsigned long)
	PhysBase, DumpLevel, Split             int
	StartPFN, EndPFN                       int
	OffVmcoreinfo, SizeVmcoreinfo          int
	OffNote, SizeNote                      int
	OffEraseinfo, SizeEraseinfo            int
	StartPFN64, EndPFN64, MaxMapnr64, Size int
}

// The kdump_sub_header layouts: 64-bit; 32-bit with 64-bit fields aligned
// to 4 (i386, and QEMU's packed struct); 32-bit with 64-bit fields aligned
// to 8 (ARM32).
var (
	Sub64 = SubLayout{Name: "64-bit", Long: 8, PhysBase: 0, DumpLevel: 8, Split: 12, StartPFN: 16, EndPFN: 24,
		OffVmcoreinfo: 32, SizeVmcoreinfo: 40, OffNote: 48, SizeNote: 56, OffEraseinfo: 64, SizeEraseinfo: 72,
		StartPFN64: 80, EndPFN64: 88, MaxMapnr64: 96, Size: 104}
	Sub32Packed = SubLayout{Name: "32-bit packed", Long: 4, PhysBase: 0, DumpLevel: 4, Split: 8, StartPFN: 12, EndPFN: 16,
		OffVmcoreinfo: 20, SizeVmcoreinfo: 28, OffNote: 32, SizeNote: 40, OffEraseinfo: 44, SizeEraseinfo: 52,
		StartPFN64: 56, EndPFN64: 64, MaxMapnr64: 72, Size: 80}
	Sub32Padded = SubLayout{Name: "32-bit padded", Long: 4, PhysBase: 0, DumpLevel: 4, Split: 8, StartPFN: 12, EndPFN: 16,
		OffVmcoreinfo: 24, SizeVmcoreinfo: 32, OffNote: 40, SizeNote: 48, OffEraseinfo: 56, SizeEraseinfo: 64,
		StartPFN64: 72, EndPFN64: 80, MaxMapnr64: 88, Size: 96}
)

// SubLayoutNamed returns the sub-header layout called name (a
// diskdump.Header's SubLayout).
func SubLayoutNamed(name string) (SubLayout, bool) {
	for _, s := range []SubLayout{Sub64, Sub32Packed, Sub32Padded} {
		if s.Name == name {
			return s, true
		}
	}
	return SubLayout{}, false
}
