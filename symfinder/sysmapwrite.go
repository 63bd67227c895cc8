package symfinder

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
)

// SystemMap turns the core kernel's symbols into a System.map as the
// kernel's scripts/mksysmap writes it: vmlinux only (no module, BPF or
// other pseudo-module symbols), sorted by address (stable, so aliases
// keep the kernel's order), at link-time addresses: the KASLR offset is
// taken off every symbol of the image, which starts at _text (else
// _stext, else the lowest text symbol) and excludes absolute symbols,
// the rule ParseSystemMap adds the offset back by, so that ParseSystemMap
// with the same slide reads it back. syms is left as it was; ptrSize (4
// or 8) wraps 32-bit addresses.
func SystemMap(syms []Symbol, slide uint64, ptrSize int) []Symbol {
	core := syms[:0:0]
	var text, stext, low uint64
	var hasText, hasS, hasLow bool
	for _, s := range syms {
		if s.Module != "" {
			continue
		}
		core = append(core, s)
		if s.Kind == 'T' || s.Kind == 't' {
			switch s.Name {
			case "_text":
				text, hasText = s.Addr, true
			case "_stext":
				stext, hasS = s.Addr, true
			}
			if !hasLow || s.Addr < low {
				low, hasLow = s.Addr, true
			}
		}
	}
	start, ok := low, hasLow
	switch {
	case hasText:
		start, ok = text, true
	case hasS:
		start, ok = stext, true
	}
	mask := ^uint64(0)
	if ptrSize == 4 {
		mask = 0xffffffff
	}
	for i := range core {
		s := &core[i]
		if s.Kind != 'A' && s.Kind != 'a' && (!ok || s.Addr >= start) {
			s.Addr = (s.Addr - slide) & mask
		}
	}
	slices.SortStableFunc(core, func(a, b Symbol) int { return cmp.Compare(a.Addr, b.Addr) })
	return core
}

// WriteSystemMap writes SystemMap(syms, slide, ptrSize) to w as System.map
// lines: "%0*x %c %s", the address in 2*ptrSize hex digits.
func WriteSystemMap(w io.Writer, syms []Symbol, slide uint64, ptrSize int) error {
	bw := bufio.NewWriter(w)
	for _, s := range SystemMap(syms, slide, ptrSize) {
		if _, err := fmt.Fprintf(bw, "%0*x %c %s\n", 2*ptrSize, s.Addr, byte(s.Kind), s.Name); err != nil {
			return err
		}
	}
	return bw.Flush()
}
