package vtop

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// arm64 descriptor bits, docs/formats.md §4.2 (ARM ARM D8.3).
const (
	armDescTypeMask = 3
	armDescTable    = 3 // table above the last level, page at it
	armDescBlock    = 1
	armAddrMask48   = 0x0000ffffffffffff
)

type arm64 struct {
	phys      memory.Reader
	bo        interface{ Uint64([]byte) uint64 }
	root      uint64
	pageShift uint
	vaBits    uint // bits the walk resolves
	levels    int
	lpa64K    bool // 64K granule, 52-bit PA: PA[51:48] = desc[15:12]
	lpa2      bool // 4K/16K, 52-bit: PA[49:48] = desc[49:48], PA[51:50] = desc[9:8]
	maxBlock  uint // largest block mapping shift allowed
	buf       [8]byte
}

// oa returns the output address of descriptor e (page aligned).
func (a *arm64) oa(e uint64) uint64 {
	pa := e & armAddrMask48 &^ (1<<a.pageShift - 1)
	switch {
	case a.lpa64K:
		pa |= (e >> 12 & 0xf) << 48
	case a.lpa2:
		pa = e&0x0003ffffffffffff&^(1<<a.pageShift-1) | (e>>8&3)<<50
	}
	return pa
}

func (a *arm64) walkFrom(root, va uint64) (uint64, error) {
	orig := va
	if va>>55&1 == 1 {
		va |= 0xff << 56 // tagged kernel pointer (KASAN, MTE): tag bits to all ones
	}
	if va < ^uint64(0)<<a.vaBits {
		return 0, memory.Fault(orig, space, fmt.Sprintf("not a kernel address for %d-bit VAs", a.vaBits), ErrNotMapped)
	}
	ps := a.pageShift
	table := root
	buf := a.buf[:] // not on the stack: it would escape through memory.Reader
	for l := a.levels; l >= 1; l-- {
		shift := ps + (ps-3)*uint(l-1)
		bits := ps - 3
		if l == a.levels {
			bits = a.vaBits - shift
		}
		at := table + (va>>shift&(1<<bits-1))*8
		if err := memory.ReadFull(a.phys, buf, at); err != nil {
			return 0, entryFault(orig, levelName(l, a.levels), at, err)
		}
		e := a.bo.Uint64(buf)
		switch e & armDescTypeMask {
		case armDescTable:
			if l == 1 {
				return a.oa(e) | va&(1<<ps-1), nil
			}
			table = a.oa(e)
			continue
		case armDescBlock:
			if l > 1 && shift <= a.maxBlock {
				mask := uint64(1)<<shift - 1
				return a.oa(e)&^mask | va&mask, nil
			}
		}
		return 0, notPresent(orig, levelName(l, a.levels), e, at)
	}
	panic("unreachable")
}

func newARM64(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("arm64", "")
	}
	if cfg.PtrSize != 8 {
		return nil, unsupported("arm64", "pointer size", uint64(cfg.PtrSize))
	}
	ps := uint64(cfg.PageSize)
	if v, ok := in.PageSize(); ok && ps == 0 {
		ps = v
	}
	a := &arm64{phys: cfg.Phys, bo: cfg.ByteOrder, pageShift: pageShiftOf(ps)}
	switch a.pageShift {
	case 12:
		a.maxBlock = 30
	case 14:
		a.maxBlock = 36
	case 16:
		a.maxBlock = 42
	default:
		if ps == 0 {
			return nil, &MissingError{Arch: "arm64", Key: "PAGESIZE", Why: "and Config.PageSize is 0"}
		}
		return nil, unsupported("arm64", "page size", ps)
	}
	t := &translator{pageShift: a.pageShift, canon: armCanon}
	t.layout.Arch = "arm64"
	t.layout.KernelOffset, _ = in.KernelOffset()

	vaBits, ok := in.Number("VA_BITS")
	if !ok {
		return nil, missing("arm64", "NUMBER(VA_BITS)")
	}
	if vaBits < 36 || vaBits > 52 {
		return nil, &UnsupportedError{Arch: "arm64", What: "VA_BITS", Val: uint64(vaBits)}
	}
	actual := vaBits
	if t1sz, ok := in.Number("TCR_EL1_T1SZ"); ok && t1sz >= 12 && t1sz <= 28 {
		actual = 64 - t1sz
	}
	// Which VA size the tables are laid out for (drgn): with 64K pages the
	// kernel keeps swapper_pg_dir in the 52-bit layout and offsets TTBR1;
	// with 4K/16K a 52-bit kernel on 48-bit hardware folds a level.
	a.vaBits = uint(actual)
	if a.pageShift == 16 {
		a.vaBits = uint(vaBits)
	}
	a.levels = int((a.vaBits - 3 - 1) / (a.pageShift - 3)) // ceil((vaBits − PAGE_SHIFT) / (PAGE_SHIFT − 3))
	if mpb, _ := in.Number("MAX_PHYSMEM_BITS"); a.pageShift == 16 && (vaBits == 52 || mpb == 52) {
		a.lpa64K = true
	}
	a.lpa2 = a.pageShift != 16 && a.vaBits == 52

	kvo, ok := in.Number("kimage_voffset")
	if !ok {
		return nil, missing("arm64", "NUMBER(kimage_voffset)")
	}
	swapper, ok := in.Symbol("swapper_pg_dir")
	if !ok {
		return nil, missing("arm64", "SYMBOL(swapper_pg_dir)")
	}
	a.root = swapper - kvo
	t.layout.Levels, t.layout.Root = a.levels, a.root
	t.walk = func(va uint64) (uint64, error) { return a.walkFrom(a.root, va) }
	t.pt = a.ptWalker
	if _, err := readEntry(cfg.Phys, cfg.ByteOrder, 8, swapper, "pgd", a.root); err != nil {
		return nil, fmt.Errorf("vtop: arm64: top-level page table: %w", err)
	}
	if pa, err := a.walkFrom(a.root, swapper); err != nil || pa != a.root {
		t.note("walk of swapper_pg_dir's own address gives %#x (%v), kimage_voffset %#x", pa, err, a.root)
	}
	anchor := swapper
	stext, ok := in.Symbol("_stext")
	if ok && stext < swapper && swapper-stext < maxImageSpan {
		anchor = stext
	}
	lo, last := imageRange(in, anchor, 1<<a.pageShift)
	if anchor == stext {
		lo = a.imageHead(t, in, stext, kvo, lo)
	}
	t.fast = append(t.fast, FastPath{Name: "kernel image (kimage_voffset)", Start: lo, Last: last, Delta: kvo})

	// Linear map, before and after the v5.4 flip (docs/formats.md §4.2).
	physOff, ok := in.Number("PHYS_OFFSET")
	if !ok {
		t.note("no NUMBER(PHYS_OFFSET): linear map goes through the walk")
		return t, nil
	}
	vaMin := min(vaBits, 48)
	pageEnd := ^uint64(0) << (vaMin - 1)
	var f FastPath
	if swapper >= pageEnd || vaBits == 52 { // v5.4+: linear map in the lower half
		po := ^uint64(0) << vaBits
		f = FastPath{Name: "linear map", Start: max(po, ^uint64(0)<<actual), Last: pageEnd - 1, Delta: po - physOff}
		t.layout.DirectMap = po
	} else { // ≤ v5.3: linear map in the upper half
		po := ^uint64(0) << (vaBits - 1)
		f = FastPath{Name: "linear map (pre-v5.4 layout)", Start: po, Last: ^uint64(0), Delta: po - physOff}
		t.layout.DirectMap = po
	}
	t.layout.DirectMapSource = "VA_BITS and PHYS_OFFSET"
	// Cross-check with the walk where VMCOREINFO names a linear address.
	if ms, ok := in.Symbol("mem_section"); ok && ms >= f.Start && ms <= f.Last {
		if pa, err := a.walkFrom(a.root, ms); err == nil && pa != ms-f.Delta {
			t.note("linear map off: mem_section %#x walks to %#x, linear rule gives %#x", ms, pa, ms-f.Delta)
			t.layout.DirectMap, t.layout.DirectMapSource = 0, ""
			return t, nil
		}
	}
	t.fast = append(t.fast, f)
	return t, nil
}

// armHeadAlign is the alignment of the arm64 kernel image's start, _text:
// MIN_KIMG_ALIGN, which KASLR offsets are multiples of (since v5.8 there is
// no TEXT_OFFSET).
const armHeadAlign = 2 << 20

// imageHead returns where the kernel-image fast path starts: _text when the
// page tables map the image head [_text, _stext) (the Image header and
// .head.text, 64 KiB) at kimage_voffset, else lo (the page of _stext).
// Whether they do depends on the kernel: Debian's 6.12, whose early C code
// maps the image from _text, does; its 6.1 maps the image from _stext and
// gives the head's pages back to the page allocator, so a fast path there
// would read whatever reused them. _text is SYMBOL(_text) when VMCOREINFO
// has it (no kernel writes it yet), else KIMAGE_VADDR + KERNELOFFSET with
// KIMAGE_VADDR = NUMBER(MODULES_END) (v5.18+ export it), else _stext
// rounded down to armHeadAlign. The walk decides: the head's first and
// last pages must translate to va − kimage_voffset. The entries it reads
// are read while the translator is built, so extracts keep them.
func (a *arm64) imageHead(t *translator, in *vmcoreinfo.Info, stext, kvo, lo uint64) uint64 {
	text, ok := in.Symbol("_text")
	if !ok {
		me, ok1 := in.Number("MODULES_END")
		ko, ok2 := in.KernelOffset()
		text = stext &^ (armHeadAlign - 1)
		if ok1 && ok2 {
			text = me + ko
		}
	}
	ps := uint64(1) << a.pageShift
	text &^= ps - 1
	if text >= lo || lo-text >= armHeadAlign {
		return lo
	}
	for _, va := range []uint64{text, lo - ps} {
		if pa, err := a.walkFrom(a.root, va); err != nil || pa != va-kvo {
			t.note("image head [%#x, %#x) left to the walk: %#x walks to %#x (%v), kimage_voffset gives %#x", text, lo, va, pa, err, va-kvo)
			return lo
		}
	}
	return text
}

// armCanon makes a tagged kernel pointer (bit 55 set, tag in bits 63:56)
// canonical.
func armCanon(va uint64) uint64 {
	if va>>55&1 == 1 {
		return va | 0xff<<56
	}
	return va
}
