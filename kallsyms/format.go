package kallsyms

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Encoding is how the address table stores symbol addresses
// (docs/formats.md §1.6).
type Encoding uint8

const (
	// EncodingUnknown is the zero value.
	EncodingUnknown Encoding = iota
	// Absolute: kallsyms_addresses[i] is the address (kernels < v4.6, and
	// v4.6–v6.10 without KALLSYMS_BASE_RELATIVE).
	Absolute
	// BaseRelative: address = relative_base + uint32(offsets[i]) (v4.6+;
	// the only relative form v6.15–v6.19).
	BaseRelative
	// AbsolutePercpu: offsets[i] >= 0 is an absolute per-CPU offset, a
	// negative one means relative_base - 1 - offsets[i] (v4.6–v6.14 with
	// KALLSYMS_ABSOLUTE_PERCPU, x86-64 SMP).
	AbsolutePercpu
	// PlaceRelative: address = &offsets[i] + int32(offsets[i]) (v7.0+,
	// 64-bit or relocatable).
	PlaceRelative
	// Offsets32: address = uint32(offsets[i]) (v7.0+, 32-bit
	// non-relocatable).
	Offsets32
)

func (e Encoding) String() string {
	switch e {
	case Absolute:
		return "absolute kallsyms_addresses"
	case BaseRelative:
		return "kallsyms_offsets from kallsyms_relative_base"
	case AbsolutePercpu:
		return "kallsyms_offsets from kallsyms_relative_base with absolute per-CPU"
	case PlaceRelative:
		return "place-relative kallsyms_offsets"
	case Offsets32:
		return "32-bit absolute kallsyms_offsets"
	}
	return "unknown encoding"
}

// Region is where one table lies in kernel virtual memory. Size 0 with a
// non-zero Addr means the table was located but its size is not meaningful
// on its own; Addr 0 means the table is absent.
type Region struct {
	Addr, Size uint64
}

// Source says where Load found the tables' addresses.
type Source string

const (
	SourceVMCOREINFO Source = "vmcoreinfo" // VMCOREINFO's SYMBOL() lines
	SourceOptions    Source = "options"    // Options.Tables
	SourceScan       Source = "scan"       // a scan of the kernel image
)

// Order is the order in which scripts/kallsyms emitted the tables.
type Order string

const (
	OrderV46 Order = "v4.6" // addresses before num_syms
	OrderV62 Order = "v6.2" // seqs_of_names between markers and token_table (also 6.1.y)
	OrderV64 Order = "v6.4" // addresses after token_index
)

// Layout says where the tables are and how they are encoded, as Load found
// them. Reads always go through the Reader given to Load; the regions are
// for callers that want to keep or extract the pages.
type Layout struct {
	// Source says where the table addresses came from (ScanHit is the
	// token table found when it is SourceScan).
	Source  Source
	ScanHit uint64

	// Target holds the byte order and pointer size the tables were
	// decoded with (its PageSize is 0).
	memory.Target
	Align    int  // label alignment: pointer size before v7.0, 4 from v7.0
	NumSyms  int  // symbols in the tables
	BigNames bool // two-byte length prefixes (v6.1+) were used to walk names
	Encoding Encoding
	// RelativeBase is the value of kallsyms_relative_base where the
	// encoding uses one.
	RelativeBase uint64
	// Order is the emission order found (OrderV46, OrderV62, OrderV64).
	Order Order

	NumSymsTable   Region
	Names          Region
	Markers        Region
	MarkerSize     int // bytes per marker: 4 (v4.20+) or the pointer size
	TokenTable     Region
	TokenIndex     Region
	Addresses      Region // kallsyms_addresses or kallsyms_offsets
	RelativeBaseAt Region
	SeqsOfNames    Region // Addr 0 when the kernel has none
}

// Describe summarises the layout on a few lines for an info command.
func (l *Layout) Describe() string {
	var b strings.Builder
	src := string(l.Source)
	if l.Source == SourceScan {
		src = fmt.Sprintf("scan at %#x", l.ScanHit)
	}
	fmt.Fprintf(&b, "kallsyms: %d symbols, located by %s\n", l.NumSyms, src)
	order := "little-endian"
	if l.ByteOrder == binary.BigEndian {
		order = "big-endian"
	}
	lens := "one-byte"
	if l.BigNames {
		lens = "two-byte (big symbols)"
	}
	fmt.Fprintf(&b, "kallsyms: %s, %d-byte pointers, %d-byte alignment, %s order, %s name lengths\n",
		order, l.PtrSize, l.Align, l.Order, lens)
	fmt.Fprintf(&b, "kallsyms: addresses: %s", l.Encoding)
	if l.RelativeBaseAt.Addr != 0 {
		fmt.Fprintf(&b, ", relative_base %#x", l.RelativeBase)
	}
	b.WriteByte('\n')
	row := func(name string, r Region) {
		if r.Addr != 0 {
			fmt.Fprintf(&b, "kallsyms: %-14s %#x +%#x\n", name, r.Addr, r.Size)
		}
	}
	row("num_syms", l.NumSymsTable)
	row("names", l.Names)
	row("markers", l.Markers)
	row("seqs_of_names", l.SeqsOfNames)
	row("token_table", l.TokenTable)
	row("token_index", l.TokenIndex)
	if l.Encoding == Absolute {
		row("addresses", l.Addresses)
	} else {
		row("offsets", l.Addresses)
	}
	row("relative_base", l.RelativeBaseAt)
	return b.String()
}

// Regions returns every table the layout names, in address order.
func (l *Layout) Regions() []Region {
	var out []Region
	for _, r := range []Region{l.NumSymsTable, l.Names, l.Markers, l.SeqsOfNames, l.TokenTable, l.TokenIndex, l.Addresses, l.RelativeBaseAt} {
		if r.Addr != 0 {
			out = append(out, r)
		}
	}
	sortRegions(out)
	return out
}

func sortRegions(rs []Region) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Addr < rs[j-1].Addr; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// Limits and heuristics. Each is a property of scripts/kallsyms output that
// holds for every kernel generation unless stated.
const (
	// tokenIndexSize is 256 u16 offsets.
	tokenIndexSize = 512
	// maxTokenTable caps the token table: 256 strings of at most
	// maxTokenLen bytes. The corpus kernels' tables are 836–1108 bytes,
	// their longest token 22 (docs/formats.md §1.4).
	maxTokenLen   = 512
	maxTokenTable = 256 * (maxTokenLen + 1)
	// maxCodes is the longest entry in code bytes: a one-byte prefix
	// allows 255; the v6.1 two-byte prefix 0x3fff, but KSYM_NAME_LEN (512
	// since v6.1) bounds a name, and a code byte expands to at least one
	// character, so 511 code bytes plus the type.
	maxCodes = 512
	// maxEntry is the longest names entry: a two-byte prefix + maxCodes.
	maxEntry = 2 + maxCodes
	// minEntry is the shortest: a prefix and one code byte (scripts/kallsyms
	// rejects empty names).
	minEntry = 2
	// maxMarkerStep bounds the bytes of 256 names (v2e uses 0x40000;
	// the corpus kernels' steps are 0x3b7–0x27b5, docs/formats.md §1.5).
	maxMarkerStep = 256 * maxEntry
	// maxNumSyms bounds num_syms for scans and allocations: real kernels
	// have 30k–250k symbols; 1<<22 leaves a margin of 16 and matches
	// symfinder's reservation cap.
	maxNumSyms = 1 << 22
	// maxExpanded bounds one expanded name (type included): KSYM_NAME_LEN
	// is 512 since v6.1 (128 before).
	maxExpanded = 1024
	// readChunk is how much memory a table read allocates at a time, so a
	// lying count hits a fault before it allocates much.
	readChunk = 4 << 20
	// scanFirstRead is a scan's first read; its reads double from there
	// to readChunk.
	scanFirstRead = 64 << 10
	// DefaultScanWindow is how far after the image start a scan looks: the
	// tables end at most 21.3 MiB after _stext on the corpus kernels, and
	// 26 MiB on a Debian 7.2 kernel measured before (docs/formats.md §7.1).
	DefaultScanWindow = 64 << 20
)
