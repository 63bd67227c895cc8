package symfinder

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// ParseSystemMap reads a System.map: "ADDRESS TYPE NAME" lines as the
// kernel's scripts/mksysmap writes them from nm -n (sorted by address; the
// order is kept for All, but need not be sorted). name becomes the
// finder's name.
//
// System.map holds link-time addresses; slide is the KASLR offset of the
// dump the symbols are for (VMCOREINFO's KERNELOFFSET), added, modulo the
// address width, to every symbol of the kernel image. Symbols outside the
// image keep their address: absolute ones ('A'/'a') and those below the
// image's start, which is _text (else _stext, else the lowest text
// symbol). On x86_64 that leaves the zero-based per-CPU offsets
// (0..0x3xxxx, type 'D'/'d' in System.map, 'A' in /proc/kallsyms)
// unshifted, as a fixed floor of 0xffffffff80000000 would, and it also
// holds for arm64, whose image lies below that floor. The symbols outside
// the image form a group of their own for derived sizes; see [SymbolFile].
//
// Sizes are derived as in [ParseKallsyms]. nm's address-less lines for
// undefined symbols ("U", "w", "v"), which mksysmap drops, are skipped;
// any other line that does not parse is a [*LineError] wrapping
// [ErrCorrupt]. Parsing allocates per file, never per line.
func ParseSystemMap(r io.Reader, name string, slide uint64) (*SymbolFile, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineLen)
	raw := NewBuilder(name, "")
	var (
		width int
		num   int
		start imageStartFinder
	)
	for sc.Scan() {
		num++
		line := sc.Bytes()
		if len(line) == 0 || isUndefinedNMLine(line) {
			continue
		}
		l, msg := parseSymLine(line, false)
		if msg == "" && width != 0 && l.width != width {
			msg = fmt.Sprintf("address has %d hex digits, earlier lines %d", l.width, width)
		}
		if msg != "" {
			return nil, lineError(name, num, line, msg)
		}
		width = l.width
		start.see(l.addr, l.kind, l.name)
		raw.Add(l.addr, l.kind, l.name)
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, lineError(name, num+1, nil, fmt.Sprintf("line longer than %d bytes", maxLineLen))
		}
		return nil, fmt.Errorf("symfinder: %s: %w", name, err)
	}
	return splitImage(name, raw, start, slide, addrMask(width))
}

// isUndefinedNMLine reports whether line is nm's "<spaces> U name" (or w,
// v) for a symbol without an address.
func isUndefinedNMLine(line []byte) bool {
	if line[0] != ' ' {
		return false
	}
	t := bytes.TrimLeft(line, " ")
	return len(t) > 2 && (t[0] == 'U' || t[0] == 'w' || t[0] == 'v') && t[1] == ' '
}

// splitImage moves the vmlinux symbols of raw into an image group, shifted
// by slide, and a group of the rest, keeping the file order as runs.
func splitImage(name string, raw *Builder, start imageStartFinder, slide, mask uint64) (*SymbolFile, error) {
	src := raw.ix
	imageStart, hasText := start.start()
	inImage := func(i int) bool {
		if isAbsolute(src.names[src.nameOff[i]]) {
			return false
		}
		return !hasText || src.addrs[i] >= imageStart
	}
	nImage := 0
	for i := range src.addrs {
		if inImage(i) {
			nImage++
		}
	}
	g := groupSet{name: name}
	if nImage == len(src.addrs) { // common: shift in place
		if len(src.addrs) > 0 {
			for i := range src.addrs {
				src.addrs[i] = (src.addrs[i] + slide) & mask
			}
			g.bs, g.roles = []*Builder{raw}, []role{roleImage}
			g.runs = []run{{ix: 0, from: 0, n: len(src.addrs)}}
		}
		return g.finish()
	}
	image, other := -1, -1
	for i := range src.addrs {
		if inImage(i) {
			if image < 0 {
				image = g.add(roleImage, "")
				g.bs[image].Grow(nImage, len(src.names))
			}
			g.note(image)
			g.bs[image].Add((src.addrs[i]+slide)&mask, src.Kind(i), src.NameBytes(i))
		} else {
			if other < 0 {
				other = g.add(roleOther, "")
			}
			g.note(other)
			g.bs[other].Add(src.addrs[i], src.Kind(i), src.NameBytes(i))
		}
	}
	return g.finish()
}
