package vtop

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// x86_64 constants: docs/formats.md §4.1, and the kernel's
// Documentation/arch/x86/x86_64/mm.rst.
const (
	startKernelMap = 0xffffffff80000000 // __START_KERNEL_map, never changed
	// KERNEL_IMAGE_SIZE (arch/x86/include/asm/page_64_types.h) is 1 GiB
	// with CONFIG_RANDOMIZE_BASE and 512 MiB without; module space starts
	// right after it. VMCOREINFO has NUMBER(KERNEL_IMAGE_SIZE) from ≈v4.20;
	// before, a KERNELOFFSET other than 0 proves RANDOMIZE_BASE (the image
	// was moved), so 1 GiB; otherwise the smaller value is taken, so that
	// the text fast path never covers module space (a RANDOMIZE_BASE kernel
	// booted with nokaslr lies below 512 MiB anyway).
	kernelImageSizeKASLR = 1 << 30
	kernelImageSize512   = 512 << 20
	// x86PTEAddrMask selects bits 51..12 of an entry: the next table or
	// page frame. Bit 63 (NX) and the software bits stay out.
	x86PTEAddrMask = 0x000ffffffffff000
	x86Present     = 1 << 0
	x86PSE         = 1 << 7
	// Direct-map windows searched for page_offset_base: the lowest base
	// of the KASLR memory region (__PAGE_OFFSET_BASE_L4/L5 before v4.20 is
	// 0xffff880000000000 / 0xff10000000000000, after it ...888... / ff11...).
	directMapWindowL4 = 0xffff880000000000
	directMapWindowL5 = 0xff10000000000000
	// directMapMinSize is how far past page_offset_base the direct-map fast
	// path reaches when VMCOREINFO has no NUMBER(VMALLOC_START): KASLR
	// (arch/x86/mm/kaslr.c) places vmalloc at least one TiB (the region's
	// size in TB, rounded up, plus padding) after page_offset_base, and the
	// fixed layout leaves far more; so [base, base+1 TiB) is only ever
	// direct map.
	directMapMinSize = 1 << 40
	// physAlign is the smallest CONFIG_PHYSICAL_ALIGN on x86_64: phys_base
	// is always a multiple of it.
	physAlign = 2 << 20
	// physBaseSearchLimit bounds the search for phys_base when nothing
	// states it (pre-v4.10 VMCOREINFO and no sub-header): the kernel's
	// top-level table is looked for in the first 64 GiB of physical memory.
	physBaseSearchLimit = 64 << 30
)

type x86 struct {
	phys   memory.Reader
	bo     binary.ByteOrder
	root   uint64
	levels int
	sme    uint64
	buf    [8]byte
}

var x86Level = [6]string{1: "pte", 2: "pmd", 3: "pud", 4: "p4d", 5: "pgd"}

func (x *x86) level(l int) string {
	if l == x.levels {
		return "pgd"
	}
	return x86Level[l]
}

// walkFrom translates va through the tables rooted at root.
func (x *x86) walkFrom(root, va uint64) (uint64, error) {
	top := uint(47)
	if x.levels == 5 {
		top = 56
	}
	if hi := int64(va) >> top; hi != 0 && hi != -1 {
		return 0, memory.Fault(va, space, fmt.Sprintf("non-canonical address for %d-level paging", x.levels), ErrNotMapped)
	}
	table := root
	buf := x.buf[:] // not on the stack: it would escape through memory.Reader
	for l := x.levels; l >= 1; l-- {
		shift := 12 + 9*uint(l-1)
		at := table + (va>>shift&511)*8
		if err := memory.ReadFull(x.phys, buf, at); err != nil {
			return 0, entryFault(va, x.level(l), at, err)
		}
		e := x.bo.Uint64(buf)
		if e&x86Present == 0 {
			return 0, notPresent(va, x.level(l), e, at)
		}
		addr := e & x86PTEAddrMask &^ x.sme
		if l == 1 {
			return addr | va&0xfff, nil
		}
		if (l == 2 || l == 3) && e&x86PSE != 0 {
			mask := uint64(1)<<shift - 1
			return addr&^mask | va&mask, nil
		}
		table = addr
	}
	panic("unreachable")
}

func newX86_64(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("x86_64", "")
	}
	if cfg.PtrSize != 8 {
		return nil, unsupported("x86_64", "pointer size", uint64(cfg.PtrSize))
	}
	t := &translator{pageShift: 12}
	t.layout.Arch = "x86_64"
	x := &x86{phys: cfg.Phys, bo: cfg.ByteOrder, levels: 4}
	if v, ok := in.Number("pgtable_l5_enabled"); ok && v == 1 {
		x.levels = 5
	}
	x.sme, _ = in.Number("sme_mask")
	t.layout.KernelOffset, _ = in.KernelOffset()

	imageSize := uint64(kernelImageSize512)
	if v, ok := in.Number("KERNEL_IMAGE_SIZE"); ok && v > 0 && v <= kernelImageSizeKASLR {
		imageSize = v
	} else if t.layout.KernelOffset != 0 {
		imageSize = kernelImageSizeKASLR
		t.note("no NUMBER(KERNEL_IMAGE_SIZE): KERNELOFFSET %#x implies RANDOMIZE_BASE, so a 1 GiB kernel text map", t.layout.KernelOffset)
	} else {
		t.note("no NUMBER(KERNEL_IMAGE_SIZE) and KERNELOFFSET 0: a 512 MiB kernel text map")
	}

	var rootVA uint64
	haveRoot := false
	for _, s := range []string{"init_top_pgt", "swapper_pg_dir", "init_level4_pgt"} {
		if v, ok := in.Symbol(s); ok {
			rootVA, haveRoot = v, true
			break
		}
	}
	if haveRoot && (rootVA < startKernelMap || rootVA-startKernelMap >= imageSize) {
		t.note("top-level table %#x lies outside the kernel text map; walk off", rootVA)
		haveRoot = false
	}

	// phys_base, docs/formats.md §3.5.
	switch v, ok := in.Number("phys_base"); {
	case ok:
		t.layout.PhysBase, t.layout.PhysBaseSource = v, "NUMBER(phys_base)"
	case cfg.PhysBase != nil:
		t.layout.PhysBase, t.layout.PhysBaseSource = *cfg.PhysBase, "Config.PhysBase"
	case haveRoot:
		pb, err := x.findPhysBase(rootVA)
		if err != nil {
			return nil, err
		}
		t.layout.PhysBase, t.layout.PhysBaseSource = pb, "page-table search"
		if sym, ok := in.Symbol("phys_base"); ok && sym >= startKernelMap && sym-startKernelMap < imageSize {
			if got, err := memory.Uint64(cfg.Phys, cfg.ByteOrder, sym-startKernelMap+pb); err == nil && got != pb {
				t.note("phys_base variable at %#x holds %#x, page tables say %#x", sym, got, pb)
			}
		}
	default:
		return nil, &MissingError{Arch: "x86_64", Key: "NUMBER(phys_base)", Why: "and no Config.PhysBase or top-level table to derive it"}
	}
	pb := t.layout.PhysBase
	t.fast = append(t.fast, FastPath{Name: "kernel text map", Start: startKernelMap, Last: startKernelMap + imageSize - 1, Delta: startKernelMap - pb})

	if !haveRoot {
		t.noWalk = missing("x86_64", "SYMBOL(init_top_pgt)/SYMBOL(swapper_pg_dir)")
		return t, nil
	}
	x.root = rootVA - startKernelMap + pb
	t.layout.Levels, t.layout.Root = x.levels, x.root
	t.walk = func(va uint64) (uint64, error) { return x.walkFrom(x.root, va) }
	t.pt = x.ptWalker
	// The root must read: otherwise every walk would fail the same way.
	if _, err := readEntry(cfg.Phys, cfg.ByteOrder, 8, rootVA, "pgd", x.root); err != nil {
		return nil, fmt.Errorf("vtop: x86_64: top-level page table: %w", err)
	}
	if pa, err := x.walkFrom(x.root, rootVA); err != nil || pa != x.root {
		t.note("walk of the top-level table's own address gives %#x (%v), text map %#x", pa, err, x.root)
	}

	if base, ok := x.findDirectMap(); ok {
		t.layout.DirectMap, t.layout.DirectMapSource = base, "page-table walk"
		last := base + directMapMinSize - 1
		if vs, ok := in.Number("VMALLOC_START"); ok && vs > base {
			last = vs - 1
		}
		t.fast = append(t.fast, FastPath{Name: "direct map", Start: base, Last: last, Delta: base})
	} else {
		t.note("page_offset_base not found in the page tables; direct map goes through the walk")
	}
	return t, nil
}

// findPhysBase searches for phys_base when nothing states it: the candidate
// (a multiple of physAlign) for which the top-level table, walked from its
// own text-map physical address, maps its own virtual address back to
// itself. Errors wrap vmcoreinfo.ErrMissingInfo.
func (x *x86) findPhysBase(rootVA uint64) (uint64, error) {
	off := rootVA - startKernelMap
	// pa = off + pb ≥ 0 and pb ≡ 0 (mod physAlign): start at the lowest such pb.
	first := -(off &^ (physAlign - 1)) // may be "negative"
	for pa := off & (physAlign - 1); pa < physBaseSearchLimit; pa += physAlign {
		pb := first + (pa - off&(physAlign-1))
		if got, err := x.walkFrom(pa, rootVA); err == nil && got == pa {
			return pb, nil
		}
	}
	return 0, &MissingError{Arch: "x86_64", Key: "NUMBER(phys_base)", Why: "and the page-table search found no self-mapping top-level table"}
}

// findDirectMap finds page_offset_base: the lowest virtual address in the
// direct-map window whose mapping is physical 0 on a 1 GiB boundary (KASLR
// randomises the base in PUD steps and maps physical memory from 0;
// libkdumpfile linux_directmap_by_pgt does the same). It visits mappings in
// address order from the window's start and reads at most
// directMapSearchTables page-table pages.
func (x *x86) findDirectMap() (uint64, bool) {
	window := uint64(directMapWindowL4)
	if x.levels == 5 {
		window = directMapWindowL5
	}
	s := &dmSearch{x: x, budget: directMapSearchTables}
	topShift := 12 + 9*uint(x.levels-1)
	return s.visit(x.root, x.levels, ^uint64(0)<<(topShift+9), int(window>>topShift&511))
}

// directMapSearchTables bounds findDirectMap's reads: enough to pass an
// unrelated mapping or two (the v4.15–v4.19 LDT remap) before the direct map.
const directMapSearchTables = 64

type dmSearch struct {
	x      *x86
	budget int
	page   [4096]byte
}

// visit scans table (at the given level, mapping virtual addresses from
// vbase) from entry first on and returns the base if a match is found.
func (s *dmSearch) visit(table uint64, level int, vbase uint64, first int) (uint64, bool) {
	if s.budget <= 0 {
		return 0, false
	}
	s.budget--
	if err := memory.ReadFull(s.x.phys, s.page[:], table); err != nil {
		return 0, false
	}
	var entries [512]uint64
	for i := range entries {
		entries[i] = s.x.bo.Uint64(s.page[i*8:])
	}
	shift := 12 + 9*uint(level-1)
	for i := first; i < 512; i++ {
		e := entries[i]
		if e&x86Present == 0 {
			continue
		}
		va := vbase + uint64(i)<<shift
		addr := e & x86PTEAddrMask &^ s.x.sme
		if level == 1 || ((level == 2 || level == 3) && e&x86PSE != 0) {
			if addr&^(uint64(1)<<shift-1) == 0 && va&(1<<30-1) == 0 {
				return va, true
			}
			continue
		}
		if base, ok := s.visit(addr, level-1, va, 0); ok {
			return base, true
		}
		if s.budget <= 0 {
			return 0, false
		}
	}
	return 0, false
}
