package vtop

import (
	"encoding/binary"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// pageOffsets are the i386 PAGE_OFFSET values of the CONFIG_VMSPLIT_*
// choices, default (3G/1G) first. VMCOREINFO does not say which one a
// kernel uses; New takes the first the page tables confirm
// (docs/formats.md §4.3).
var pageOffsets = []uint64{0xC0000000, 0xB0000000, 0x80000000, 0x78000000, 0x40000000}

type i386 struct {
	phys memory.Reader
	bo   binary.ByteOrder
	pae  bool
	root uint64
	buf  [8]byte
}

func (x *i386) walkFrom(root, va uint64) (uint64, error) {
	if va>>32 != 0 {
		return 0, memory.Fault(va, space, "address above 4 GiB on i386", ErrNotMapped)
	}
	if !x.pae { // 2 levels of 1024 4-byte entries; 4 MiB pages (PSE, PSE-36)
		at := root + (va>>22)*4
		e, err := x.entry(4, va, "pgd", at)
		if err != nil {
			return 0, err
		}
		if e&x86Present == 0 {
			return 0, notPresent(va, "pgd", e, at)
		}
		if e&x86PSE != 0 {
			return e&0xffc00000 | (e>>13&0xff)<<32 | va&0x3fffff, nil
		}
		at = e&0xfffff000 + (va>>12&1023)*4
		if e, err = x.entry(4, va, "pte", at); err != nil {
			return 0, err
		}
		if e&x86Present == 0 {
			return 0, notPresent(va, "pte", e, at)
		}
		return e&0xfffff000 | va&0xfff, nil
	}
	// PAE: a 4-entry PDPT, then 512-entry tables of 8-byte entries; 2 MiB pages.
	table := root
	for l, shift := range [3]uint{30, 21, 12} {
		name := [3]string{"pgd", "pmd", "pte"}[l]
		idx := va >> shift & 511
		at := table + idx*8
		e, err := x.entry(8, va, name, at)
		if err != nil {
			return 0, err
		}
		if e&x86Present == 0 {
			return 0, notPresent(va, name, e, at)
		}
		addr := e & x86PTEAddrMask
		switch {
		case l == 2:
			return addr | va&0xfff, nil
		case l == 1 && e&x86PSE != 0:
			return addr&^(1<<21-1) | va&(1<<21-1), nil
		}
		table = addr
	}
	panic("unreachable")
}

func newI386(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("i386", "")
	}
	if cfg.PtrSize != 4 {
		return nil, unsupported("i386", "pointer size", uint64(cfg.PtrSize))
	}
	if cfg.PageSize != 0 && cfg.PageSize != 4096 {
		return nil, unsupported("i386", "page size", uint64(cfg.PageSize))
	}
	x := &i386{phys: cfg.Phys, bo: cfg.ByteOrder, pae: in.Config("X86_PAE")}
	t := &translator{pageShift: 12}
	t.layout.Arch = "i386"
	swapper, ok := in.Symbol("swapper_pg_dir")
	if !ok {
		return nil, missing("i386", "SYMBOL(swapper_pg_dir)")
	}
	// Confirm PAGE_OFFSET: the candidate under which swapper_pg_dir maps
	// PAGE_OFFSET to physical 0 and itself to itself.
	po := uint64(0)
	for _, c := range pageOffsets {
		if swapper < c {
			continue
		}
		root := swapper - c
		if pa, err := x.walkFrom(root, c); err != nil || pa != 0 {
			continue
		}
		if pa, err := x.walkFrom(root, swapper); err != nil || pa != root {
			continue
		}
		po = c
		t.layout.DirectMapSource = "page tables"
		break
	}
	if po == 0 {
		po = pageOffsets[0]
		t.layout.DirectMapSource = "default 3G/1G split (page tables did not confirm one)"
		t.note("PAGE_OFFSET not confirmed by swapper_pg_dir; assuming %#x", po)
	}
	t.layout.DirectMap = po
	anchor := swapper
	if v, ok := in.Symbol("_stext"); ok && v < swapper && v >= po {
		anchor = v
	}
	lo, last := imageRange(in, anchor, 4096)
	t.fast = append(t.fast, FastPath{Name: "kernel image (PAGE_OFFSET)", Start: lo, Last: min(last, 1<<32-1), Delta: po})
	x.root = swapper - po
	t.layout.Levels, t.layout.Root = 2, x.root
	if x.pae {
		t.layout.Levels = 3
	}
	t.walk = func(va uint64) (uint64, error) { return x.walkFrom(x.root, va) }
	t.pt = x.ptWalker
	return t, nil
}

// entry reads a size-byte entry into x's scratch buffer (a local one would
// escape through memory.Reader and cost an allocation per level).
func (x *i386) entry(size int, va uint64, level string, at uint64) (uint64, error) {
	if err := memory.ReadFull(x.phys, x.buf[:size], at); err != nil {
		return 0, entryFault(va, level, at, err)
	}
	if size == 4 {
		return uint64(x.bo.Uint32(x.buf[:4])), nil
	}
	return x.bo.Uint64(x.buf[:]), nil
}
