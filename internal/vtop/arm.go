package vtop

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// 32-bit ARM (ARMv7-A) translation, docs/formats.md §4.6: the
// short-descriptor format (two levels: 4096 first-level entries of 4
// bytes, 1 MiB sections and 16 MiB supersections, second-level tables of
// 256 entries with 4 KiB small and 64 KiB large pages) and, with
// CONFIG_ARM_LPAE, the long-descriptor format (three levels: 4 first-level
// entries of 8 bytes, then 512-entry tables; 1 GiB and 2 MiB blocks).

// armPageOffsets are the PAGE_OFFSET values of CONFIG_VMSPLIT_3G, _3G_OPT,
// _2G and _1G, default first. VMCOREINFO says neither PAGE_OFFSET nor
// PHYS_OFFSET; New takes the first pair the page tables confirm.
var armPageOffsets = []uint64{0xC0000000, 0xB0000000, 0x80000000, 0x40000000}

// armPhysOffsets are the PHYS_OFFSET candidates tried when the dump's saved
// ranges are not known (Config.PhysRanges nil): where boards put RAM.
var armPhysOffsets = []uint64{0x40000000, 0x80000000, 0, 0x10000000, 0x20000000, 0x60000000, 0x70000000, 0xC0000000}

// armPhysAlign is the alignment of PHYS_OFFSET the kernel requires with
// CONFIG_ARM_PATCH_PHYS_VIRT (v5.11+; 16 MiB before), and armPhysBelow
// how far below a saved range's start PHYS_OFFSET is looked for:
// swapper_pg_dir lies TEXT_OFFSET − 16 or 20 KiB into RAM (Debian's
// armmp-lpae: 0x203000), so the range holding it in an extract starts that
// far above PHYS_OFFSET.
const (
	armPhysAlign = 2 << 20
	armPhysBelow = 16 << 20
)

// maxARMPhysCandidates bounds the PHYS_OFFSET candidates New tries (an
// extract has one saved range per kept run of pages).
const maxARMPhysCandidates = 256

// Short-descriptor bits (ARM ARM B3.5.1).
const (
	armL1Table      = 1       // bits[1:0] 0b01: second-level table at bits[31:10]
	armL1Section    = 2       // bits[1:0] 0b1x: section or supersection (bit 0 is PXN)
	armL1Super      = 1 << 18 // supersection: 16 MiB, PA[39:32] in bits[8:5], [23:20]
	armL2Large      = 1       // bits[1:0] 0b01: 64 KiB large page at bits[31:16]
	armL2Small      = 2       // bits[1:0] 0b1x: 4 KiB small page at bits[31:12] (bit 0 is XN)
	armL2TableMask  = 0xfffffc00
	armLPAEAddrMask = 0x000000fffffff000 // long descriptors: output address bits[39:12]
)

type arm32 struct {
	phys memory.Reader
	bo   binary.ByteOrder
	lpae bool
	root uint64
	buf  [8]byte
}

func (a *arm32) walkFrom(root, va uint64) (uint64, error) {
	if va>>32 != 0 {
		return 0, memory.Fault(va, space, "address above 4 GiB on arm", ErrNotMapped)
	}
	if !a.lpae {
		at := root + (va>>20)*4
		e, err := a.entry(4, va, "pgd", at)
		if err != nil {
			return 0, err
		}
		switch {
		case e&armL1Section != 0 && e&armL1Super != 0:
			pa := e&0xff000000 | (e>>20&0xf)<<32 | (e>>5&0xf)<<36
			return pa | va&0xffffff, nil
		case e&armL1Section != 0:
			return e&0xfff00000 | va&0xfffff, nil
		case e&3 != armL1Table:
			return 0, notPresent(va, "pgd", e, at)
		}
		at = e&armL2TableMask + (va>>12&0xff)*4
		if e, err = a.entry(4, va, "pte", at); err != nil {
			return 0, err
		}
		switch {
		case e&armL2Small != 0:
			return e&0xfffff000 | va&0xfff, nil
		case e&3 == armL2Large:
			return e&0xffff0000 | va&0xffff, nil
		}
		return 0, notPresent(va, "pte", e, at)
	}
	table := root
	for l, shift := range [3]uint{30, 21, 12} {
		name := [3]string{"pgd", "pmd", "pte"}[l]
		idx := va >> shift & 511 // the first level has 4 entries: va < 4 GiB
		at := table + idx*8
		e, err := a.entry(8, va, name, at)
		if err != nil {
			return 0, err
		}
		switch {
		case e&3 == 3 && l == 2: // page
			return e&armLPAEAddrMask | va&0xfff, nil
		case e&3 == 3: // table
			table = e & armLPAEAddrMask
			continue
		case e&3 == 1 && l < 2: // 1 GiB or 2 MiB block
			mask := uint64(1)<<shift - 1
			return e&armLPAEAddrMask&^mask | va&mask, nil
		}
		return 0, notPresent(va, name, e, at)
	}
	panic("unreachable")
}

// entry reads a size-byte entry into a's scratch buffer (a local one would
// escape through memory.Reader and cost an allocation per level).
func (a *arm32) entry(size int, va uint64, level string, at uint64) (uint64, error) {
	if err := memory.ReadFull(a.phys, a.buf[:size], at); err != nil {
		return 0, entryFault(va, level, at, err)
	}
	if size == 4 {
		return uint64(a.bo.Uint32(a.buf[:4])), nil
	}
	return a.bo.Uint64(a.buf[:]), nil
}

func newARM(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("arm", "")
	}
	if cfg.PtrSize != 4 {
		return nil, unsupported("arm", "pointer size", uint64(cfg.PtrSize))
	}
	if cfg.PageSize != 0 && cfg.PageSize != 4096 {
		return nil, unsupported("arm", "page size", uint64(cfg.PageSize))
	}
	a := &arm32{phys: cfg.Phys, bo: cfg.ByteOrder, lpae: in.Config("ARM_LPAE")}
	t := &translator{pageShift: 12}
	t.layout.Arch = "arm"
	swapper, ok := in.Symbol("swapper_pg_dir")
	if !ok {
		return nil, missing("arm", "SYMBOL(swapper_pg_dir)")
	}
	if swapper>>32 != 0 {
		return nil, fmt.Errorf("vtop: arm: SYMBOL(swapper_pg_dir) %#x above 4 GiB: %w", swapper, memory.ErrCorrupt)
	}
	phys := armPhysCandidates(cfg)
	// The pair under which swapper_pg_dir maps itself to itself and
	// PAGE_OFFSET to PHYS_OFFSET (that entry may be missing from an
	// extract). Only PAGE_OFFSET − PHYS_OFFSET matters to the first test.
	var po, physOff uint64
	found := false
	for _, c := range armPageOffsets {
		if swapper < c {
			continue
		}
		for _, p := range phys {
			root := swapper - c + p
			if pa, err := a.walkFrom(root, swapper); err != nil || pa != root {
				continue
			}
			if pa, err := a.walkFrom(root, c); err == nil && pa != p || err != nil && !errors.Is(err, memory.ErrNotSaved) {
				continue
			}
			po, physOff, found = c, p, true
			break
		}
		if found {
			break
		}
	}
	if found {
		t.layout.DirectMapSource = "page tables"
	} else {
		po = armPageOffsets[0]
		if len(phys) > 0 {
			physOff = phys[0]
		}
		t.layout.DirectMapSource = "default 3G/1G split (page tables did not confirm one)"
		t.note("PAGE_OFFSET and PHYS_OFFSET not confirmed by swapper_pg_dir; assuming %#x and %#x", po, physOff)
	}
	t.layout.DirectMap = po
	t.layout.PhysBase, t.layout.PhysBaseSource = physOff, "PHYS_OFFSET, "+t.layout.DirectMapSource
	anchor := swapper
	if v, ok := in.Symbol("_stext"); ok && v < swapper && v >= po {
		anchor = v
	}
	lo, last := imageRange(in, anchor, 4096)
	t.fast = append(t.fast, FastPath{Name: "kernel image (PAGE_OFFSET)", Start: lo, Last: min(last, 1<<32-1), Delta: po - physOff})
	a.root = swapper - po + physOff
	t.layout.Levels, t.layout.Root = 2, a.root
	if a.lpae {
		t.layout.Levels = 3
	}
	t.walk = func(va uint64) (uint64, error) { return a.walkFrom(a.root, va) }
	t.pt = a.ptWalker
	return t, nil
}

// armPhysCandidates returns the PHYS_OFFSET values to try, in order:
// NUMBER(PHYS_OFFSET) if VMCOREINFO has it (arm64's name; no 32-bit kernel
// writes it yet), then for the start of every saved range the armPhysAlign
// boundaries up to armPhysBelow below it, nearest first (swapper_pg_dir
// lies in the first megabytes of RAM, so the range holding it starts at
// most that far above PHYS_OFFSET), else the usual board values.
func armPhysCandidates(cfg Config) []uint64 {
	var out []uint64
	seen := map[uint64]bool{}
	add := func(v uint64) bool {
		if v>>32 == 0 && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
		return len(out) < maxARMPhysCandidates
	}
	if v, ok := cfg.Info.Number("PHYS_OFFSET"); ok {
		add(v)
	}
	if cfg.PhysRanges != nil {
		cfg.PhysRanges(func(start, _ uint64) bool {
			p := start &^ (armPhysAlign - 1)
			for k := uint64(0); k < armPhysBelow/armPhysAlign && p >= k*armPhysAlign; k++ {
				if !add(p - k*armPhysAlign) {
					return false
				}
			}
			return true
		})
	}
	if len(out) == 0 || cfg.PhysRanges == nil {
		for _, v := range armPhysOffsets {
			add(v)
		}
	}
	return out
}

func (a *arm32) ptWalker() *ptWalker {
	if !a.lpae {
		return &ptWalker{
			phys: a.phys, bo: a.bo, root: a.root, entrySize: 4, levels: 2,
			shift: func(l int) uint { return 12 + 8*uint(l-1) },
			bits: func(l int) uint {
				if l == 2 {
					return 12
				}
				return 8
			},
			decode: func(e uint64, l int) (bool, bool, uint64) {
				if l == 1 {
					return e&3 != 0, true, 0
				}
				switch {
				case e&armL1Section != 0:
					return true, true, 0
				case e&3 == armL1Table:
					return true, false, e & armL2TableMask
				}
				return false, false, 0
			},
			vaLimit: 1 << 32,
		}
	}
	return &ptWalker{
		phys: a.phys, bo: a.bo, root: a.root, entrySize: 8, levels: 3,
		shift: func(l int) uint { return 12 + 9*uint(l-1) },
		bits: func(l int) uint {
			if l == 3 {
				return 2
			}
			return 9
		},
		decode: func(e uint64, l int) (bool, bool, uint64) {
			switch {
			case e&3 == 3:
				return true, l == 1, e & armLPAEAddrMask
			case e&3 == 1 && l > 1:
				return true, true, 0
			}
			return false, false, 0
		},
		vaLimit: 1 << 32,
	}
}
