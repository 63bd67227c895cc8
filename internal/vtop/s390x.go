package vtop

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// s390x DAT (z/Architecture Principles of Operation, "Dynamic Address
// Translation"; arch/s390/include/asm/pgtable.h). A translation starts at
// the table the address-space-control element designates — swapper_pg_dir
// for the kernel — of one of four types, and goes down through the types
// below it:
//
//	table          index bits of the VA   entries   one entry maps
//	region-first   63..53 (RFX)           2048      8 PiB   (2^53)
//	region-second  52..42 (RSX)           2048      4 TiB   (2^42)
//	region-third   41..31 (RTX)           2048      2 GiB   (2^31)
//	segment        30..20 (SX)            2048      1 MiB   (2^20)
//	page           19..12 (PX)            256       4 KiB
//
// Region and segment entries carry their own table type (TT, bits 2-3 of
// the low byte), so the type of swapper_pg_dir is read from its entries;
// the kernel's ASCE (in the lowcore) is not needed. A region entry gives
// the next table's origin (4 KiB aligned) and, in TF/TL, which quarters
// of it (512 entries each) exist. A region-third entry with FC set maps a
// 2 GiB frame (EDAT-2), a segment entry with FC set a 1 MiB frame
// (EDAT-1); otherwise a segment entry points at a 2 KiB page table.
// Entries are 8 bytes, big-endian.
const (
	// levels, counted from the page table
	s390RegionFirst  = 5
	s390RegionSecond = 4
	s390RegionThird  = 3
	s390Segment      = 2
	s390Page         = 1

	s390EntryInvalid  = 0x20  // _REGION_ENTRY_INVALID, _SEGMENT_ENTRY_INVALID
	s390EntryTypeMask = 0x0c  // TT: 3 region-first, 2 region-second, 1 region-third, 0 segment
	s390EntryFC       = 0x400 // _REGION3_ENTRY_LARGE, _SEGMENT_ENTRY_LARGE
	s390RegionTF      = 0xc0  // table offset: first quarter of the next table present
	s390RegionTL      = 0x03  // table length: last quarter present
	s390PageInvalid   = 0x400 // _PAGE_INVALID

	s390TableOrigin   = ^uint64(0xfff)     // region entry: next region or segment table
	s390PTOrigin      = ^uint64(0x7ff)     // segment entry: page table (2 KiB aligned)
	s390SegmentFrame  = ^uint64(1<<20 - 1) // segment entry with FC: 1 MiB frame
	s390Region3Frame  = ^uint64(1<<31 - 1) // region-third entry with FC: 2 GiB frame
	s390PageFrame     = ^uint64(0xfff)     // page-table entry: 4 KiB frame
	s390CRSTEntries   = 2048               // entries of a region or segment table
	s390MaxRealMemory = uint64(1) << 53    // frames above are not real memory on any machine
)

// s390Levels names the DAT tables by level (1 = page table).
var s390Levels = [6]string{1: "page table", 2: "segment table", 3: "region-third table", 4: "region-second table", 5: "region-first table"}

// s390Shift is the lowest VA bit of each level's index.
var s390Shift = [6]uint{1: 12, 2: 20, 3: 31, 4: 42, 5: 53}

type s390 struct {
	phys memory.Reader
	root uint64
	top  int // level of swapper_pg_dir: 2 (segment) .. 5 (region-first)
	buf  [8]byte
}

// walk translates va through the tables from root, a table of level top.
func (s *s390) walk(va uint64) (uint64, error) {
	if s.top < 5 && va>>(s390Shift[s.top]+11) != 0 {
		return 0, memory.Fault(va, space, fmt.Sprintf("beyond the %d-bit address space of a %s", s390Shift[s.top]+11, s390Levels[s.top]), ErrNotMapped)
	}
	table := s.root
	// The quarters of the table present.
	first, last := uint64(0), uint64(3)
	// Not on the stack: it would escape through memory.Reader.
	buf := s.buf[:]
	for l := s.top; ; l-- {
		name := s390Levels[l]
		idx := va >> s390Shift[l] & (s390CRSTEntries - 1)
		if l == s390Page {
			idx = va >> 12 & 0xff
		} else if q := idx >> 9; q < first || q > last {
			return 0, memory.Fault(va, space, fmt.Sprintf("%s index %#x outside its length (quarters %d..%d)", name, idx, first, last), ErrNotMapped)
		}
		at := table + idx*8
		if err := memory.ReadFull(s.phys, buf, at); err != nil {
			return 0, entryFault(va, name, at, err)
		}
		e := binary.BigEndian.Uint64(buf)
		if l == s390Page {
			if e&s390PageInvalid != 0 {
				return 0, notPresent(va, name, e, at)
			}
			return e&s390PageFrame | va&0xfff, nil
		}
		if e&s390EntryInvalid != 0 {
			return 0, notPresent(va, name, e, at)
		}
		if tt := int(e&s390EntryTypeMask) >> 2; tt != l-2 {
			return 0, badEntry(va, name, e, at, fmt.Sprintf("has table type %d", tt), memory.ErrCorrupt)
		}
		switch {
		case l == s390Segment && e&s390EntryFC != 0:
			return e&s390SegmentFrame | va&(1<<20-1), nil
		case l == s390Segment:
			table, first, last = e&s390PTOrigin, 0, 3
		case l == s390RegionThird && e&s390EntryFC != 0:
			return e&s390Region3Frame | va&(1<<31-1), nil
		default:
			table, first, last = e&s390TableOrigin, e&s390RegionTF>>6, e&s390RegionTL
		}
	}
}

// s390TableType returns the level (2..5) of the region or segment table at
// pa: the table type every valid entry names, which must agree. An entry
// that is invalid says nothing (Linux fills empty entries with the table's
// own type, but zeroed memory would read as segment entries).
func s390TableType(phys memory.Reader, pa uint64) (int, error) {
	buf := make([]byte, s390CRSTEntries*8)
	if err := memory.ReadFull(phys, buf, pa); err != nil {
		return 0, err
	}
	level := 0
	for i := 0; i < len(buf); i += 8 {
		e := binary.BigEndian.Uint64(buf[i:])
		if e&s390EntryInvalid != 0 {
			continue
		}
		l := int(e&s390EntryTypeMask)>>2 + 2
		if level != 0 && l != level {
			return 0, fmt.Errorf("entries of types %d and %d at physical %#x: %w", level-2, l-2, pa+uint64(i), memory.ErrCorrupt)
		}
		level = l
	}
	if level == 0 {
		return 0, fmt.Errorf("no valid entry in the table at physical %#x: %w", pa, ErrNotMapped)
	}
	return level, nil
}

// newS390X maps the kernel image (docs/formats.md §4.4) — identity before
// ≈v6.10, va − KERNELOFFSET + KERNELOFFPHYS after — and the identity map of
// memory (at 0 before ≈v6.10, at IDENTITYBASE after), and walks
// swapper_pg_dir for everything else (vmalloc, modules). Without
// SYMBOL(swapper_pg_dir) those addresses fail with an error wrapping
// vmcoreinfo.ErrMissingInfo.
func newS390X(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("s390x", "")
	}
	if cfg.PtrSize != 8 {
		return nil, unsupported("s390x", "pointer size", uint64(cfg.PtrSize))
	}
	if cfg.PageSize != 0 && cfg.PageSize != 4096 {
		return nil, unsupported("s390x", "page size", uint64(cfg.PageSize))
	}
	t := &translator{pageShift: 12}
	t.layout.Arch = "s390x"
	t.layout.KernelOffset, _ = in.KernelOffset()
	anchor, ok := in.Symbol("_stext")
	if !ok {
		return nil, missing("s390x", "SYMBOL(_stext)")
	}
	hex := func(key string) (uint64, bool, error) {
		s, ok := in.Get(key)
		if !ok {
			return 0, false, nil
		}
		var v uint64
		if _, err := fmt.Sscanf(s, "%x", &v); err != nil {
			return 0, false, fmt.Errorf("vtop: s390x: %s=%q: %w", key, s, memory.ErrCorrupt)
		}
		return v, true, nil
	}
	kphys, haveKPhys, err := hex("KERNELOFFPHYS")
	if err != nil {
		return nil, err
	}
	ident, haveIdent, err := hex("IDENTITYBASE")
	if err != nil {
		return nil, err
	}
	lo, last := imageRange(in, anchor, 4096)
	image := FastPath{Name: "kernel image (identity)", Start: lo, Last: last}
	if haveKPhys {
		// ≈v6.10+: the image has its own virtual region, the identity
		// map starts at IDENTITYBASE (arch/s390/include/asm/page.h,
		// __pa_nodebug).
		image = FastPath{Name: "kernel image (KERNELOFFSET/KERNELOFFPHYS)", Start: lo, Last: last, Delta: t.layout.KernelOffset - kphys}
		t.fast = append(t.fast, image)
	} else {
		ident, haveIdent = 0, true
	}
	if haveIdent {
		// The identity map reaches high_memory when that can be read (it
		// is itself in the image); before v6.10 it covers at least the
		// image, which it contains.
		end, name := uint64(0), "identity map (up to high_memory)"
		if !haveKPhys {
			end, name = last+1, "identity map (kernel image, lowcore)"
		}
		if hm, ok := in.Symbol("high_memory"); ok && hm >= image.Start && hm <= image.Last {
			if v, err := memory.Uint64(cfg.Phys, binary.BigEndian, hm-image.Delta); err == nil && v > ident && v-ident <= s390MaxRealMemory && v > end {
				end, name = v, "identity map (up to high_memory)"
			}
		}
		if end > ident {
			t.fast = append(t.fast, FastPath{Name: name, Start: ident, Last: end - 1, Delta: ident})
			t.layout.DirectMap, t.layout.DirectMapSource = ident, "identity"
			if haveKPhys {
				t.layout.DirectMapSource = "IDENTITYBASE"
			}
		} else {
			t.note("identity map at %#x: high_memory unreadable, not used", ident)
		}
	}

	if haveKPhys {
		t.layout.Modules = s390ModulesBelowImage(t.layout.KernelOffset)
	}
	rootVA, ok := in.Symbol("swapper_pg_dir")
	if !ok {
		t.noWalk = missing("s390x", "SYMBOL(swapper_pg_dir)")
		return t, nil
	}
	root, err := t.translateSlow(rootVA)
	t.stats = Stats{} // New's own translation
	if err != nil {
		t.noWalk = fmt.Errorf("vtop: s390x: swapper_pg_dir %#x: %w", rootVA, err)
		t.note("swapper_pg_dir %#x is in no linear map; walk off", rootVA)
		return t, nil
	}
	top, err := s390TableType(cfg.Phys, root)
	if err != nil {
		return nil, fmt.Errorf("vtop: s390x: swapper_pg_dir at physical %#x: %w", root, err)
	}
	s := &s390{phys: cfg.Phys, root: root, top: top}
	t.layout.Levels, t.layout.Root = top, root
	if !haveKPhys {
		t.layout.Modules = s390ModulesAtTop(top)
	}
	t.walk = s.walk
	t.pt = s.ptWalker
	t.note("swapper_pg_dir is a %s", s390Levels[top])
	return t, nil
}

// s390x module area (arch/s390/boot/startup.c setup_kernel_memory_layout;
// MODULES_LEN in arch/s390/include/asm/pgtable.h). The kernel does not
// print MODULES_VADDR: it is chosen at boot, from the layout.
const (
	s390ModulesLen  = 1 << 31 // MODULES_LEN, 6.1 and 6.12
	s390SegmentSize = 1 << 20 // _SEGMENT_SIZE
	// s390TopSlack is what may lie between MODULES_END and the top of the
	// address space before v6.10: the absolute lowcore mapping
	// (ABS_LOWCORE_MAP_SIZE = NR_CPUS × 8 KiB, at most 4 MiB for
	// NR_CPUS 512) rounded down to a segment.
	s390TopSlack = 16 << 20
)

// s390ModulesBelowImage is the module area of the v6.10+ layout, which
// gives the kernel image its own virtual region (KERNELOFFPHYS printed):
// MODULES_END = round_down(kernel_start, _SEGMENT_SIZE), MODULES_VADDR =
// MODULES_END − MODULES_LEN, kernel_start being __kaslr_offset
// (KERNELOFFSET).
func s390ModulesBelowImage(kernelOffset uint64) [][2]uint64 {
	end := kernelOffset &^ (s390SegmentSize - 1)
	if end < s390ModulesLen {
		return nil
	}
	return [][2]uint64{{end - s390ModulesLen, end}}
}

// s390ModulesAtTop is the module area of the layout before v6.10, whose
// kernel image is identity-mapped at the bottom: vmax is the top of the
// address space the kernel's ASCE spans (_REGION2_SIZE, 4 TiB, for a
// region-third swapper_pg_dir; _REGION1_SIZE, 8 PiB, for region-second),
// MODULES_END lies just below it (below the absolute lowcore since v6.0)
// and MODULES_VADDR = MODULES_END − MODULES_LEN. Under the ultravisor
// (protected virtualization) or with KASAN vmax is lower and the area
// is not found here.
func s390ModulesAtTop(top int) [][2]uint64 {
	if top < s390RegionThird || top > s390RegionSecond {
		return nil
	}
	vmax := uint64(1) << (s390Shift[top] + 11)
	return [][2]uint64{{vmax - s390ModulesLen - s390TopSlack, vmax}}
}
