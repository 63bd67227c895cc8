package symfinder

import (
	"bufio"
	"fmt"
	"io"
)

// ParseKallsyms reads a saved /proc/kallsyms: one symbol a line, printed by
// the kernel as "%px %c %s" (address in 16 hex digits on 64-bit kernels, 8
// on 32-bit, type letter, name) followed, for module symbols, by
// "\t[MODULE]". name becomes the finder's name ("kallsyms-file", a path).
//
// The result keeps the file's order for All: vmlinux first, then each
// module as the kernel lists them, then the bracketed pseudo-modules
// ([bpf], [__builtin__ftrace], [__builtin__kprobes]), which stay modules
// named without brackets. The text carries no sizes, so every size is
// derived as the kernel's kallsyms_lookup_size_offset derives it: up to the
// next higher address in the same group (vmlinux, one module); the highest
// symbol of a group has an unknown size and contains only its own address.
// Absolute symbols ('A'/'a', among them x86_64's zero-based per-CPU
// offsets) form a group of their own; see [SymbolFile].
//
// Empty lines are skipped and a final '\r' on a line is ignored. A line
// that does not parse, or whose address width differs from the first
// line's, is a [*LineError] wrapping [ErrCorrupt] naming the line; a file
// whose addresses are all zero is an error wrapping [ErrAddressesHidden];
// read errors are returned as they come. An empty file gives an empty
// finder. Parsing allocates per file and per module, never per line.
func ParseKallsyms(r io.Reader, name string) (*SymbolFile, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineLen)
	g := groupSet{name: name}
	var (
		cur     = -1 // group of the previous line
		curMod  string
		curRole role
		image   = -1 // vmlinux group
		abs     = -1 // absolute group
		mods    map[string]int
		width   int
		num     int
		count   int
		allZero = true
	)
	for sc.Scan() {
		num++
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		l, msg := parseSymLine(line, true)
		if msg == "" && width != 0 && l.width != width {
			msg = fmt.Sprintf("address has %d hex digits, earlier lines %d", l.width, width)
		}
		if msg != "" {
			return nil, lineError(name, num, line, msg)
		}
		width = l.width
		count++
		allZero = allZero && l.addr == 0
		want := roleModule
		if l.module == nil {
			want = roleImage
			if isAbsolute(l.kind) {
				want = roleOther
			}
		}
		if cur < 0 || want != curRole || (want == roleModule && string(l.module) != curMod) {
			switch want {
			case roleOther:
				if abs < 0 {
					abs = g.add(roleOther, "")
				}
				cur = abs
			case roleImage:
				if image < 0 {
					image = g.add(roleImage, "")
				}
				cur = image
			default:
				i, ok := mods[string(l.module)]
				if !ok {
					if mods == nil {
						mods = make(map[string]int)
					}
					m := string(l.module)
					i = g.add(roleModule, m)
					mods[m] = i
				}
				cur = i
			}
			curRole, curMod = want, g.bs[cur].ix.module
		}
		g.note(cur)
		g.bs[cur].Add(l.addr, l.kind, l.name)
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, lineError(name, num+1, nil, fmt.Sprintf("line longer than %d bytes", maxLineLen))
		}
		return nil, fmt.Errorf("symfinder: %s: %w", name, err)
	}
	if count > 1 && allZero {
		return nil, fmt.Errorf("symfinder: %s: %w", name, ErrAddressesHidden)
	}
	return g.finish()
}
