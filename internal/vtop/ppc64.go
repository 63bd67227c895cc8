package vtop

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// ppc64 Book3S-64 (POWER, pseries and powernv; arch/powerpc/include/asm/
// book3s/64/{pgtable,radix,hash,radix-4k,radix-64k,hash-4k,hash-64k}.h).
// The kernel lives in quadrant 3 of the effective address space (top two
// bits set). Its linear map is va − PAGE_OFFSET (0xc000000000000000) from
// PAGE_OFFSET up to KERN_VIRT_START (= VMALLOC_START), and holds the
// kernel image too. Everything above (vmalloc, modules, BPF, I/O,
// vmemmap) is in the kernel's Linux page tables, rooted at swapper_pg_dir.
//
// Those tables have the same entry format under both MMUs; the geometry
// (index bits per level) depends on the MMU and the page size:
//
//	                  pte  pmd  pud  pgd   bits   KERN_VIRT_START
//	radix,  4 KiB      9    9    9   13    52    0xc008000000000000
//	radix, 64 KiB      5    9    9   13    52    0xc008000000000000
//	hash,   4 KiB      9    7    9    9    46    0xc000100000000000 (*)
//	hash,  64 KiB      8   10   10    8    52    0xc008000000000000
//
// (*) as hash-4k.h had it; 6.12's is 0xc0003d0000000000. The kernel prints
// NUMBER(VMALLOC_START), which is used where present.
//
// Entries are 8 bytes, big-endian even on ppc64le (the radix MMU reads
// them so; Linux keeps them as __be64 under hash too). Bit 63
// (_PAGE_PRESENT) marks an entry valid; bit 62 (_PAGE_PTE) marks a leaf,
// at the pte level or as a huge page at the pmd (2 MiB radix) or pud
// (1 GiB) level. A leaf's real page number is bits 12..52 (PTE_RPN_MASK,
// _PAGE_PA_MAX = 53: the hash MMU keeps its HPTE slot bits above); a
// directory entry's next table is the entry less
// 0xc0000000000000ff (PMD/PUD/P4D_MASKED_BITS: the valid and leaf bits,
// and radix's next-level size in the low bits). Under radix the tables
// also map the linear map (with huge pages); under hash the linear map is
// only in the hashed page table, which this package does not read, and
// is translated by the fast path alone.
const (
	ppcPageOffset    = 0xc000000000000000    // PAGE_OFFSET, KERNELBASE
	ppcPresent       = 1 << 63               // _PAGE_PRESENT
	ppcLeaf          = 1 << 62               // _PAGE_PTE
	ppcMaskedBits    = 0xc0000000000000ff    // PMD_MASKED_BITS: not the next table's address
	ppcRPNMask       = (1<<53 - 1) &^ 0xfff  // PTE_RPN_MASK (_PAGE_PA_MAX = 53; hash keeps HPTE slot bits above)
	ppcRadixVirt     = 0xc008000000000000    // RADIX_KERN_VIRT_START, H_KERN_VIRT_START (64K)
	ppcHash4KVirt    = 0xc000100000000000    // H_KERN_VIRT_START (4K)
	ppcQuadrantMask  = 0x3fffffffffffffff    // the EA less its quadrant
	ppcLevels        = 4                     // pgd, pud, pmd, pte
	ppcEntrySize     = 8                     // bytes per entry
	ppcLinearBound   = ppcPageOffset + 1<<52 // no linear map reaches further
	ppcHash4KVmalloc = 0xc0003d0000000000    // H_KERN_VIRT_START (4K), 6.1 and 6.12's hash-4k.h
	ppcModuleWindow  = 2 << 30               // the part of vmalloc searched for modules
	ppcMinVirtStart  = ppcPageOffset + 1<<30 // a KERN_VIRT_START below is not a kernel's
)

// ppcLevelNames names the tables by level (1 = pte).
var ppcLevelNames = [ppcLevels + 1]string{1: "pte", 2: "pmd", 3: "pud", 4: "pgd"}

// ppcGeometry is the index bits of each level (1 = pte .. 4 = pgd).
type ppcGeometry [ppcLevels + 1]uint

var (
	ppcRadix4K  = ppcGeometry{1: 9, 2: 9, 3: 9, 4: 13}
	ppcRadix64K = ppcGeometry{1: 5, 2: 9, 3: 9, 4: 13}
	ppcHash4K   = ppcGeometry{1: 9, 2: 7, 3: 9, 4: 9}
	ppcHash64K  = ppcGeometry{1: 8, 2: 10, 3: 10, 4: 8}
)

type ppc64 struct {
	phys      memory.Reader
	root      uint64
	pageShift uint
	geo       ppcGeometry
	shift     [ppcLevels + 1]uint // lowest VA bit of each level's index
	eaBits    uint                // bits of the EA the tables translate
	buf       [8]byte
}

func newPPC64Walker(phys memory.Reader, root uint64, pageShift uint, geo ppcGeometry) *ppc64 {
	p := &ppc64{phys: phys, root: root, pageShift: pageShift, geo: geo}
	s := pageShift
	for l := 1; l <= ppcLevels; l++ {
		p.shift[l] = s
		s += geo[l]
	}
	p.eaBits = s
	return p
}

// walk translates va through the kernel's Linux page tables.
func (p *ppc64) walk(va uint64) (uint64, error) {
	if va>>62 != ppcPageOffset>>62 {
		return 0, memory.Fault(va, space, "not a kernel address (quadrant 3)", ErrNotMapped)
	}
	if (va&ppcQuadrantMask)>>p.eaBits != 0 {
		return 0, memory.Fault(va, space, fmt.Sprintf("beyond the %d-bit range of the kernel page tables", p.eaBits), ErrNotMapped)
	}
	table := p.root
	// Not on the stack: it would escape through memory.Reader.
	buf := p.buf[:]
	for l := ppcLevels; l >= 1; l-- {
		idx := va >> p.shift[l] & (1<<p.geo[l] - 1)
		at := table + idx*ppcEntrySize
		if err := memory.ReadFull(p.phys, buf, at); err != nil {
			return 0, entryFault(va, ppcLevelNames[l], at, err)
		}
		e := binary.BigEndian.Uint64(buf)
		if e&ppcPresent == 0 {
			return 0, notPresent(va, ppcLevelNames[l], e, at)
		}
		if e&ppcLeaf != 0 {
			size := uint64(1) << p.shift[l]
			return e&ppcRPNMask&^(size-1) | va&(size-1), nil
		}
		if l == 1 {
			return 0, badEntry(va, ppcLevelNames[l], e, at, "is not a leaf (_PAGE_PTE clear)", memory.ErrCorrupt)
		}
		table = e &^ ppcMaskedBits
	}
	return 0, memory.Fault(va, space, "no leaf after the pte level", memory.ErrCorrupt) // not reached: l == 1 returns
}

func (p *ppc64) ptWalker() *ptWalker {
	return &ptWalker{
		phys: p.phys, bo: binary.BigEndian, root: p.root, entrySize: ppcEntrySize, levels: ppcLevels,
		shift: func(l int) uint { return p.shift[l] },
		bits:  func(l int) uint { return p.geo[l] },
		decode: func(e uint64, l int) (bool, bool, uint64) {
			if e&ppcPresent == 0 {
				return false, false, 0
			}
			if e&ppcLeaf != 0 {
				return true, true, 0
			}
			// As walk: a pte-level entry that is not a leaf maps nothing.
			return l > 1, false, e &^ ppcMaskedBits
		},
		vaBase:  ppcPageOffset,
		vaLimit: ppcPageOffset + 1<<p.eaBits,
	}
}

// newPPC64 maps the linear map [PAGE_OFFSET, VMALLOC_START) and walks
// swapper_pg_dir above it (docs/formats.md §4.5). The MMU is
// NUMBER(RADIX_MMU); a kernel that does not print it (before v5.1) is
// taken as radix if the radix walk of its own tables translates _stext
// as the linear map does, else as hash.
func newPPC64(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("ppc64", "")
	}
	if cfg.PtrSize != 8 {
		return nil, unsupported("ppc64", "pointer size", uint64(cfg.PtrSize))
	}
	pageSize := uint64(cfg.PageSize)
	if pageSize == 0 {
		if ps, ok := in.PageSize(); ok {
			pageSize = ps
		}
	}
	var shift uint
	switch pageSize {
	case 4096:
		shift = 12
	case 65536:
		shift = 16
	case 0:
		return nil, missing("ppc64", "PAGESIZE")
	default:
		return nil, unsupported("ppc64", "page size", pageSize)
	}
	t := &translator{pageShift: shift}
	t.layout.Arch = "ppc64"
	t.layout.KernelOffset, _ = in.KernelOffset()

	radix, haveRadix := in.Number("RADIX_MMU")
	vmalloc, haveVmalloc := in.Number("VMALLOC_START")
	if haveVmalloc && (vmalloc < ppcMinVirtStart || vmalloc > ppcLinearBound) {
		return nil, fmt.Errorf("vtop: ppc64: VMALLOC_START %#x is not in the kernel's quadrant: %w", vmalloc, memory.ErrCorrupt)
	}
	// linear sets the linear map's fast path: up to VMALLOC_START, else
	// up to the MMU's KERN_VIRT_START; and the module areas.
	linear := func(isRadix bool) {
		virt := uint64(ppcRadixVirt)
		switch {
		case haveVmalloc:
			virt = vmalloc
		case !isRadix && shift == 12:
			virt = ppcHash4KVirt
		}
		t.fast = []FastPath{{Name: "linear map (PAGE_OFFSET)", Start: ppcPageOffset, Last: virt - 1, Delta: ppcPageOffset}}
		t.layout.DirectMap, t.layout.DirectMapSource = ppcPageOffset, "PAGE_OFFSET"
		t.layout.Modules = ppcModuleAreas(vmalloc, haveVmalloc, isRadix, shift)
	}
	mmu := func(r bool) string {
		if r {
			return "radix"
		}
		return "hash"
	}
	geo := func(isRadix bool) ppcGeometry {
		switch {
		case isRadix && shift == 12:
			return ppcRadix4K
		case isRadix:
			return ppcRadix64K
		case shift == 12:
			return ppcHash4K
		}
		return ppcHash64K
	}

	rootVA, ok := in.Symbol("swapper_pg_dir")
	if !ok {
		linear(!haveRadix || radix != 0)
		t.noWalk = missing("ppc64", "SYMBOL(swapper_pg_dir)")
		return t, nil
	}
	if rootVA < ppcPageOffset || rootVA >= ppcLinearBound {
		return nil, fmt.Errorf("vtop: ppc64: swapper_pg_dir %#x is not in the linear map: %w", rootVA, memory.ErrCorrupt)
	}
	root := rootVA - ppcPageOffset
	var p *ppc64
	if haveRadix {
		p = newPPC64Walker(cfg.Phys, root, shift, geo(radix != 0))
		linear(radix != 0)
		t.note("%s MMU (NUMBER(RADIX_MMU)=%d)", mmu(radix != 0), radix)
	} else {
		// Before RADIX_MMU was printed (v5.1?): the radix tables map the
		// linear map, hash's Linux tables do not.
		p = newPPC64Walker(cfg.Phys, root, shift, geo(true))
		isRadix := false
		if stext, ok := in.Symbol("_stext"); ok && stext >= ppcPageOffset && stext < ppcHash4KVirt {
			pa, err := p.walk(stext)
			isRadix = err == nil && pa == stext-ppcPageOffset
		}
		if !isRadix {
			p = newPPC64Walker(cfg.Phys, root, shift, geo(false))
		}
		linear(isRadix)
		t.note("%s MMU (no NUMBER(RADIX_MMU); the radix walk of _stext %s)", mmu(isRadix),
			map[bool]string{true: "agrees with the linear map", false: "does not agree with the linear map"}[isRadix])
	}
	if root > t.fast[0].Last-ppcPageOffset {
		return nil, fmt.Errorf("vtop: ppc64: swapper_pg_dir %#x is not in the linear map: %w", rootVA, memory.ErrCorrupt)
	}
	t.layout.Levels, t.layout.Root = ppcLevels, root
	t.walk = p.walk
	t.pt = p.ptWalker
	return t, nil
}

// ppcModuleAreas returns where Book3S-64 allocates module memory: from
// VMALLOC_START up (arch/powerpc/kernel/module.c, 6.1 module_alloc and
// 6.12 execmem_arch_setup: MODULES_VADDR is defined for 32-bit Book3S and
// 8xx only, 64-bit allocates in [VMALLOC_START, VMALLOC_END)), lowest
// address first, so the first ppcModuleWindow bytes of vmalloc. VMALLOC_START
// is NUMBER(VMALLOC_START) where the kernel prints it (v6.9+), else
// KERN_VIRT_START (book3s/64/{radix,hash-64k,hash-4k}.h): 0xc008000000000000
// under radix and under hash with 64 KiB pages; under hash with 4 KiB pages
// 0xc0003d0000000000 (6.1, 6.12), and 0xc000100000000000 in older
// hash-4k.h, tried second.
func ppcModuleAreas(vmalloc uint64, haveVmalloc, isRadix bool, pageShift uint) [][2]uint64 {
	starts := []uint64{ppcRadixVirt}
	switch {
	case haveVmalloc:
		starts = []uint64{vmalloc}
	case !isRadix && pageShift == 12:
		starts = []uint64{ppcHash4KVmalloc, ppcHash4KVirt}
	}
	var out [][2]uint64
	for _, s := range starts {
		out = append(out, [2]uint64{s, s + ppcModuleWindow})
	}
	return out
}
