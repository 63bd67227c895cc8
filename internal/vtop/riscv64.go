package vtop

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// riscv64 page-table entries (RISC-V privileged architecture, "Sv39",
// "Sv48", "Sv57"; arch/riscv/include/asm/pgtable-bits.h), docs/formats.md
// §4.7. Every level is a 4 KiB table of 512 8-byte entries indexed by 9
// bits of the VA; Sv39 has 3 levels, Sv48 4, Sv57 5. An entry with V set
// and R, W, X clear points at the next table; one with R or X set is a
// leaf at any level (a 2 MiB, 1 GiB, 512 GiB or 256 TiB "superpage" above
// the last), whose PPN must be aligned to its size. W without R is
// reserved. Svnapot (bit 63) marks a last-level leaf as part of a 64 KiB
// naturally aligned run, PPN[3:0] = 0b1000.
const (
	rvValid     = 1 << 0
	rvRead      = 1 << 1
	rvWrite     = 1 << 2
	rvExec      = 1 << 3
	rvLeaf      = rvRead | rvWrite | rvExec
	rvPPNShift  = 10
	rvPPNMask   = (1<<44 - 1) << rvPPNShift // bits 53..10
	rvNapot     = 1 << 63
	rvNapot64K  = 0x8     // PPN[3:0] of a 64 KiB NAPOT entry
	rvImageSize = 2 << 20 // PMD_SIZE: the kernel image's mapping granule and alignment
	rvPageShift = 12
)

type riscv64 struct {
	phys   memory.Reader
	root   uint64
	levels int // 3 (Sv39), 4 (Sv48), 5 (Sv57)
	buf    [8]byte
}

// rvPA returns the physical address an entry's PPN names.
func rvPA(e uint64) uint64 { return (e & rvPPNMask) >> rvPPNShift << rvPageShift }

// rvLeafPA returns the physical address of va through leaf entry e at level
// l (1 = last), or what is wrong with the entry.
func rvLeafPA(e uint64, l int, va uint64) (uint64, string) {
	if e&(rvRead|rvWrite) == rvWrite {
		return 0, "is writable but not readable (reserved)"
	}
	pa := rvPA(e)
	if l > 1 {
		mask := uint64(1)<<(rvPageShift+9*uint(l-1)) - 1
		if pa&mask != 0 {
			return 0, "is a misaligned superpage"
		}
		return pa | va&mask, ""
	}
	if e&rvNapot != 0 {
		if pa>>rvPageShift&0xf != rvNapot64K {
			return 0, "has an unknown NAPOT size"
		}
		return pa&^0xffff | va&0xffff, ""
	}
	return pa | va&(1<<rvPageShift-1), ""
}

// walk translates va through the tables from swapper_pg_dir.
func (r *riscv64) walk(va uint64) (uint64, error) {
	vaBits := rvPageShift + 9*uint(r.levels)
	if top := int64(va) >> (vaBits - 1); top != 0 && top != -1 {
		return 0, memory.Fault(va, space, fmt.Sprintf("not canonical for %d-bit VAs (Sv%d)", vaBits, vaBits), ErrNotMapped)
	}
	table := r.root
	buf := r.buf[:] // not on the stack: it would escape through memory.Reader
	for l := r.levels; l >= 1; l-- {
		shift := rvPageShift + 9*uint(l-1)
		at := table + (va>>shift&511)*8
		if err := memory.ReadFull(r.phys, buf, at); err != nil {
			return 0, entryFault(va, levelName(l, r.levels), at, err)
		}
		e := binary.LittleEndian.Uint64(buf)
		if e&rvValid == 0 {
			return 0, notPresent(va, levelName(l, r.levels), e, at)
		}
		if e&rvLeaf == 0 {
			if l == 1 {
				return 0, badEntry(va, levelName(l, r.levels), e, at, "points at a table below the last level", memory.ErrCorrupt)
			}
			table = rvPA(e)
			continue
		}
		pa, bad := rvLeafPA(e, l, va)
		if bad != "" {
			return 0, badEntry(va, levelName(l, r.levels), e, at, bad, memory.ErrCorrupt)
		}
		return pa, nil
	}
	panic("unreachable")
}

// newRISCV64 maps the kernel image (va − va_kernel_pa_offset), the linear
// map of physical memory (va − PAGE_OFFSET + phys_ram_base, over the
// KERN_VIRT_SIZE the kernel gives it) and walks swapper_pg_dir for
// everything else (modules, BPF, vmalloc), with as many levels as VA_BITS
// says the kernel runs with (docs/formats.md §4.7).
func newRISCV64(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("riscv64", "")
	}
	if cfg.PtrSize != 8 {
		return nil, unsupported("riscv64", "pointer size", uint64(cfg.PtrSize))
	}
	if cfg.PageSize != 0 && cfg.PageSize != 4096 {
		return nil, unsupported("riscv64", "page size", uint64(cfg.PageSize))
	}
	t := &translator{pageShift: rvPageShift}
	t.layout.Arch = "riscv64"
	t.layout.KernelOffset, _ = in.KernelOffset()
	vaBits, ok := in.Number("VA_BITS")
	if !ok {
		return nil, missing("riscv64", "NUMBER(VA_BITS)")
	}
	r := &riscv64{phys: cfg.Phys}
	switch vaBits {
	case 39, 48, 57:
		r.levels = int(vaBits-rvPageShift) / 9
	default:
		return nil, &UnsupportedError{Arch: "riscv64", What: "VA_BITS", Val: uint64(vaBits), Supported: "Sv39, Sv48 or Sv57"}
	}
	swapper, ok := in.Symbol("swapper_pg_dir")
	if !ok {
		return nil, missing("riscv64", "SYMBOL(swapper_pg_dir)")
	}
	pageOff, okPO := in.Number("PAGE_OFFSET")
	ramBase, okRB := in.Number("phys_ram_base")
	linear := FastPath{Name: "linear map (PAGE_OFFSET, phys_ram_base)", Start: pageOff, Last: pageOff + 1<<(vaBits-2) - 1, Delta: pageOff - ramBase}
	haveLinear := okPO && okRB && pageOff>>(vaBits-1) != 0 && linear.Last > linear.Start

	// The kernel image: its own mapping since v5.13 (va_kernel_pa_offset
	// in VMCOREINFO since about v6.5), else inside the linear map.
	kvo, okKVO := in.Number("va_kernel_pa_offset")
	var image FastPath
	switch {
	case okKVO:
		anchor, ok := in.Symbol("_stext")
		if !ok {
			anchor = swapper
		}
		lo, last := imageRange(in, anchor, 1<<rvPageShift)
		image = FastPath{Name: "kernel image (va_kernel_pa_offset)", Start: lo, Last: last, Delta: kvo}
		r.root = swapper - kvo
	case haveLinear && swapper >= linear.Start && swapper <= linear.Last:
		r.root = swapper - linear.Delta
	default:
		return nil, missing("riscv64", "NUMBER(va_kernel_pa_offset)")
	}
	if _, err := readEntry(cfg.Phys, binary.LittleEndian, 8, swapper, "pgd", r.root); err != nil {
		return nil, fmt.Errorf("vtop: riscv64: top-level page table: %w", err)
	}
	t.layout.Levels, t.layout.Root = r.levels, r.root
	t.walk = r.walk
	t.pt = r.ptWalker
	t.note("Sv%d: %d-level walk of swapper_pg_dir", vaBits, r.levels)
	if okKVO {
		// The image is mapped from _start (kernel_map.virt_addr, 2 MiB
		// aligned); _stext lies a few pages above it. Take the head in
		// where the walk maps it as the rule says (the reads stay in an
		// extract, as New's).
		if head := image.Start &^ (rvImageSize - 1); head < image.Start {
			if pa, err := r.walk(head); err == nil && pa == head-kvo {
				image.Start = head
			} else {
				t.note("image head [%#x, %#x) left to the walk: walks to %#x (%v), va_kernel_pa_offset gives %#x", head, image.Start, pa, err, head-kvo)
			}
		}
		t.fast = append(t.fast, image)
	}
	if !haveLinear {
		t.note("no NUMBER(PAGE_OFFSET) or NUMBER(phys_ram_base): linear map goes through the walk")
		return t, nil
	}
	// Cross-check the rule with the walk at the linear alias of
	// swapper_pg_dir itself.
	if alias := r.root + linear.Delta; alias >= linear.Start && alias <= linear.Last {
		if pa, err := r.walk(alias); err == nil && pa != r.root {
			t.note("linear map off: %#x walks to %#x, the rule gives %#x", alias, pa, r.root)
			return t, nil
		}
	}
	t.fast = append(t.fast, linear)
	t.layout.DirectMap, t.layout.DirectMapSource = pageOff, "PAGE_OFFSET and phys_ram_base"
	return t, nil
}
