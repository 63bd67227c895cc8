package vtop

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// newS390X maps the kernel image only (docs/formats.md §4.4): identity before
// ≈v6.10, va − KERNELOFFSET + KERNELOFFPHYS after (UNVERIFIED: no such dump
// was available). There is no page-table walk yet, so vmalloc and module
// addresses fail with an error wrapping errors.ErrUnsupported.
func newS390X(cfg Config) (*translator, error) {
	in := cfg.Info
	if in == nil {
		return nil, missing("s390x", "no VMCOREINFO")
	}
	if cfg.PtrSize != 0 && cfg.PtrSize != 8 {
		return nil, fmt.Errorf("vtop: s390x with pointer size %d: %w", cfg.PtrSize, errors.ErrUnsupported)
	}
	if cfg.PageSize != 0 && cfg.PageSize != 4096 {
		return nil, fmt.Errorf("vtop: s390x page size %d: %w", cfg.PageSize, errors.ErrUnsupported)
	}
	t := &translator{pageShift: 12, noWalk: fmt.Errorf("vtop: s390x page-table walk: %w", errors.ErrUnsupported)}
	t.layout.Arch = "s390x"
	t.layout.KernelOffset, _ = in.KernelOffset()
	anchor, ok := in.Symbol("_stext")
	if !ok {
		return nil, missing("s390x", "SYMBOL(_stext)")
	}
	if phys, ok := in.Get("KERNELOFFPHYS"); ok {
		var kphys uint64
		if _, err := fmt.Sscanf(phys, "%x", &kphys); err != nil {
			return nil, fmt.Errorf("vtop: s390x: KERNELOFFPHYS=%q: %w", phys, memory.ErrCorrupt)
		}
		lo, last := imageRange(in, anchor, 4096)
		t.fast = append(t.fast, FastPath{Name: "kernel image (KERNELOFFSET/KERNELOFFPHYS)", Start: lo, Last: last, Delta: t.layout.KernelOffset - kphys})
		t.note("KERNELOFFPHYS layout (≈v6.10+) is unverified on real dumps; identity map not used")
		return t, nil
	}
	// Identity mapping of all memory: up to high_memory when it can be read
	// (it is itself in the image), else the image's symbols.
	_, last := imageRange(in, anchor, 4096)
	t.fast = append(t.fast, FastPath{Name: "identity map (kernel image, lowcore)", Start: 0, Last: last})
	if hm, ok := in.Symbol("high_memory"); ok && hm <= last {
		if v, err := memory.Uint64(cfg.Phys, cfg.ByteOrder, hm); err == nil && v > last && v <= 1<<53 {
			t.fast[0].Last = v - 1
			t.fast[0].Name = "identity map (up to high_memory)"
		}
	}
	t.layout.DirectMapSource = "identity"
	return t, nil
}
