package symfinder

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrCorrupt means a symbol file could not be parsed: typically this
// indicates a wrong or damaged input. Line errors are [*LineError]s, which
// match it with errors.Is.
var ErrCorrupt error = &corruptSentinel{"symfinder: malformed symbol file"}

// corruptSentinel is the type of ErrCorrupt. Its Is matches
// memory.ErrCorrupt, which it recognises by that error's ErrorClass method
// ("corrupt"): this package imports nothing of kdump-syms.
type corruptSentinel struct{ msg string }

func (e *corruptSentinel) Error() string { return e.msg }

// Is reports whether target is memory.ErrCorrupt.
func (e *corruptSentinel) Is(target error) bool { return isCorruptClass(target) }

func isCorruptClass(target error) bool {
	c, ok := target.(interface{ ErrorClass() string })
	return ok && c.ErrorClass() == "corrupt"
}

// ErrAddressesHidden means every address of a /proc/kallsyms capture is
// zero: it was read by a user the kernel hides addresses from
// (kptr_restrict, or no CAP_SYSLOG). Capture it again as root.
var ErrAddressesHidden = errors.New("symfinder: all addresses are zero (kptr_restrict); read /proc/kallsyms as root")

// LineError reports a malformed line of a text symbol file.
type LineError struct {
	File string // the name the caller gave the file
	Num  int    // 1-based line number
	Line string // the line, truncated to 80 bytes
	Msg  string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("symfinder: %s: line %d %q: %s", e.File, e.Num, e.Line, e.Msg)
}

// Is reports whether target is ErrCorrupt.
func (e *LineError) Is(target error) bool { return target == ErrCorrupt || isCorruptClass(target) }

func lineError(file string, num int, line []byte, msg string) *LineError {
	const maxQuoted = 80
	if len(line) > maxQuoted {
		line = line[:maxQuoted]
	}
	return &LineError{File: file, Num: num, Line: string(line), Msg: msg}
}

// maxLineLen caps one line of a text symbol file. The kernel caps names at
// KSYM_NAME_LEN (512) and module names at 56 bytes; System.map comes from
// nm, which has no cap, and Rust's mangled names can run long, so allow 64 KiB.
const maxLineLen = 64 << 10

// symLine is one parsed line. name and module alias the scanner's buffer.
type symLine struct {
	addr   uint64
	width  int // hex digits of the address: 8 or 16
	kind   byte
	name   []byte
	module []byte // nil: vmlinux
}

// parseSymLine parses "ADDR TYPE NAME" optionally followed, when
// allowModule, by "\t[MODULE]" (the kernel's "%px %c %s\t[%s]\n"). A
// trailing '\r' is ignored. It returns a constant message on error, so that
// a good line costs no allocation.
func parseSymLine(line []byte, allowModule bool) (l symLine, msg string) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return l, `want "ADDRESS TYPE NAME"`
	}
	if sp != 8 && sp != 16 {
		return l, "address is not 8 or 16 hex digits"
	}
	var ok bool
	if l.addr, ok = parseHex(line[:sp]); !ok {
		return l, "address is not hexadecimal"
	}
	l.width = sp
	rest := line[sp+1:]
	if len(rest) < 2 || rest[1] != ' ' {
		return l, "type is not one character between spaces"
	}
	if l.kind = rest[0]; l.kind <= ' ' || l.kind >= 0x7f {
		return l, "type is not a printable character"
	}
	l.name = rest[2:]
	if tab := bytes.IndexByte(l.name, '\t'); tab >= 0 {
		if !allowModule {
			return l, "text after the name"
		}
		mod := l.name[tab+1:]
		l.name = l.name[:tab]
		if len(mod) < 3 || mod[0] != '[' || mod[len(mod)-1] != ']' {
			return l, `module is not "[NAME]"`
		}
		l.module = mod[1 : len(mod)-1]
		if bytes.ContainsAny(l.module, "[] \t") {
			return l, "bad character in module name"
		}
	}
	if len(l.name) == 0 {
		return l, "empty name"
	}
	// A module line's name ends at the tab, and may hold spaces: riscv64
	// modules keep the assembler's local labels, named ".L0 " (binutils'
	// FAKE_LABEL_NAME on RISC-V), and the kernel prints them as they are.
	if l.module == nil && bytes.IndexByte(l.name, ' ') >= 0 {
		return l, "space in name"
	}
	return l, ""
}

func parseHex(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

func isAbsolute(kind byte) bool { return kind == 'A' || kind == 'a' }

// role says what part of a symbol file an index holds.
type role uint8

const (
	roleImage  role = iota // the kernel image (vmlinux)
	roleModule             // one module or pseudo-module
	roleOther              // vmlinux symbols outside the image: absolute, per-CPU offsets
)

// run is a stretch of consecutive lines of a file that went to one index.
type run struct {
	ix, from, n int
}

// SymbolFile is a [Finder] over the symbols read from one symbol file
// (/proc/kallsyms text, System.map). Its symbols are kept in one [Index]
// per group, so that sizes derived from the next higher address never
// cross a group:
//
//   - the kernel image: vmlinux's symbols, the only group with Module "";
//   - one per module, and per bracketed pseudo-module ("bpf",
//     "__builtin__ftrace", "__builtin__kprobes");
//   - vmlinux symbols outside the image (absolute symbols and per-CPU
//     offsets), also with Module "", whose sizes are derived among
//     themselves: without the split the highest per-CPU offset would seem
//     to stretch up to the kernel text.
//
// All yields the symbols in the file's order; ByName yields the groups in
// the order they first appear in the file; ByAddr asks the image first,
// then the modules, then the symbols outside the image. Like every Index, a
// SymbolFile is immutable and safe for concurrent use.
type SymbolFile struct {
	name    string
	indexes []*Index // order of first appearance in the file
	roles   []role
	runs    []run
	n       int
}

func newSymbolFile(name string, bs []*Builder, roles []role, runs []run) (*SymbolFile, error) {
	f := &SymbolFile{name: name, indexes: make([]*Index, len(bs)), roles: roles, runs: runs}
	for i, b := range bs {
		ix, err := b.Build()
		if err != nil {
			return nil, err
		}
		f.indexes[i] = ix
		f.n += ix.Len()
	}
	return f, nil
}

// Name returns the finder name given to the parser.
func (f *SymbolFile) Name() string { return f.name }

// Len returns the number of symbols.
func (f *SymbolFile) Len() int { return f.n }

// Indexes returns the file's indexes in the order their first symbol
// appears in the file. The slice must not be modified.
func (f *SymbolFile) Indexes() []*Index { return f.indexes }

// Module returns the index of the named module, or for "" the kernel
// image's index.
func (f *SymbolFile) Module(name string) (*Index, bool) {
	for i, ix := range f.indexes {
		if f.roles[i] != roleOther && ix.Module() == name {
			return ix, true
		}
	}
	return nil, false
}

// Find implements Finder. It never fails.
func (f *SymbolFile) Find(q Query, yield func(Symbol) bool) error {
	stopped := false
	y := func(s Symbol) bool {
		if !yield(s) {
			stopped = true
			return false
		}
		return true
	}
	switch q.Kind {
	case ByAddr:
		for _, want := range [...]role{roleImage, roleModule, roleOther} {
			for i, ix := range f.indexes {
				if f.roles[i] != want || ix.Len() == 0 {
					continue
				}
				if ix.findAddr(q.Addr, y); stopped {
					return nil
				}
			}
		}
	case ByName:
		for _, ix := range f.indexes {
			if ix.findName(q.Name, y); stopped {
				return nil
			}
		}
	case All:
		for _, r := range f.runs {
			ix := f.indexes[r.ix]
			for i := r.from; i < r.from+r.n; i++ {
				if !yield(ix.Symbol(i)) {
					return nil
				}
			}
		}
	}
	return nil
}

// groupSet routes the lines of a file to per-group builders and records the
// file order as runs.
type groupSet struct {
	name  string
	bs    []*Builder
	roles []role
	runs  []run
}

func (g *groupSet) add(role role, module string) int {
	bname := g.name
	switch role {
	case roleModule:
		bname += ":" + module
	case roleOther:
		bname += ":absolute"
	}
	g.bs = append(g.bs, NewBuilder(bname, module))
	g.roles = append(g.roles, role)
	return len(g.bs) - 1
}

// note records that the next symbol added goes to group i.
func (g *groupSet) note(i int) {
	if n := len(g.runs); n > 0 && g.runs[n-1].ix == i {
		g.runs[n-1].n++
		return
	}
	g.runs = append(g.runs, run{ix: i, from: g.bs[i].Len(), n: 1})
}

func (g *groupSet) finish() (*SymbolFile, error) {
	g.setExtents()
	return newSymbolFile(g.name, g.bs, g.roles, g.runs)
}

// setExtents bounds each group's lookups by address as the kernel's are
// (see Builder.SetExtents). The image answers inside KernelRanges, from
// its own section symbols (a file is taken as from a kernel of 5.16 or
// later); the symbols outside the image answer nothing, their sizes
// ending with the per-CPU area. A module's regions are not in the file:
// each stretch of its symbols that no other group's symbol interrupts is
// taken as one, ending at its highest symbol, which thus contains only
// its own address, so an extent never crosses into another module; and
// since regions are whole pages, one also ends at the first page boundary
// (of 4 KiB, the smallest) between two symbols unless both are text, the
// region a module has one of: the end of text, rodata or data may lie
// there. An address past such a cut is not found, though the kernel may
// still have it in the symbol: the file cannot say.
// Absolute symbols and mapping symbols of modules (their per-CPU
// variables, "$x", "$d") neither answer nor bound.
func (g *groupSet) setExtents() {
	sect := map[string]uint64{}
	for k, b := range g.bs {
		if g.roles[k] == roleModule {
			continue
		}
		for i, a := range b.ix.addrs {
			if name := b.ix.NameBytes(i); IsKernelSectionName(name) {
				if _, dup := sect[string(name)]; !dup {
					sect[string(name)] = a
				}
			}
		}
	}
	kr := KernelRanges(func(n string) (uint64, bool) { v, ok := sect[n]; return v, ok }, false)
	if kr != nil {
		var image, other []Range
		for _, r := range kr {
			if r.SizesOnly {
				other = append(other, r)
			} else {
				image = append(image, r)
			}
		}
		for k, b := range g.bs {
			switch g.roles[k] {
			case roleImage:
				b.SetExtents(image, func(kind byte, _ []byte) bool { return isAbsolute(kind) })
			case roleOther:
				b.SetExtents(append([]Range{}, other...), nil)
			}
		}
	}
	g.setModuleExtents()
}

// setModuleExtents gives each module group the stretches of its symbols
// as ranges (see setExtents).
func (g *groupSet) setModuleExtents() {
	type owned struct {
		addr  uint64
		group int
		text  bool
	}
	var syms []owned
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for k, b := range g.bs {
		if g.roles[k] != roleModule {
			continue
		}
		for i, a := range b.ix.addrs {
			if !SkippedInModuleLookups(b.ix.Kind(i), b.ix.NameBytes(i)) {
				kind := b.ix.Kind(i)
				syms = append(syms, owned{a, k, kind == 't' || kind == 'T'})
				lo, hi = min(lo, a), max(hi, a)
			}
		}
	}
	if syms == nil {
		for k, b := range g.bs {
			if g.roles[k] == roleModule {
				b.SetExtents(nil, SkippedInModuleLookups)
			}
		}
		return
	}
	// Kernel symbols among the modules' interrupt their stretches too.
	for k, b := range g.bs {
		if g.roles[k] == roleImage {
			for i, a := range b.ix.addrs {
				if a >= lo && a <= hi && !isAbsolute(b.ix.Kind(i)) {
					syms = append(syms, owned{a, k, false})
				}
			}
		}
	}
	slices.SortStableFunc(syms, func(x, y owned) int { return cmp.Compare(x.addr, y.addr) })
	ranges := make([][]Range, len(g.bs))
	for i := 0; i < len(syms); {
		k := syms[i].group
		r := Range{Start: syms[i].addr}
		j := i + 1
		for ; j < len(syms) && syms[j].group == k; j++ {
			if b := pageAfter(syms[j-1].addr); b != 0 && b <= syms[j].addr && !(syms[j-1].text && syms[j].text) {
				// A page boundary between two symbols of different
				// sections may end a region: stop there.
				r.End = b
				ranges[k] = append(ranges[k], r)
				r = Range{Start: syms[j].addr}
			}
		}
		r.End, r.EndIncluded = syms[j-1].addr, true
		if g.roles[k] == roleModule {
			ranges[k] = append(ranges[k], r)
		}
		i = j
	}
	for k, b := range g.bs {
		if g.roles[k] == roleModule {
			b.SetExtents(mergeTouching(ranges[k]), SkippedInModuleLookups)
		}
	}
}

// pageAfter is the first 4 KiB boundary above a (0 past the top).
func pageAfter(a uint64) uint64 { return (a | 0xfff) + 1 }

// mergeTouching joins ranges that share an address (two stretches split by
// another group's symbol at the same address) so that they stay disjoint.
func mergeTouching(rs []Range) []Range {
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (r.Start < out[n-1].End || r.Start == out[n-1].End && out[n-1].EndIncluded) {
			p := &out[n-1]
			switch {
			case r.End > p.End:
				p.End, p.EndIncluded = r.End, r.EndIncluded
			case r.End == p.End:
				p.EndIncluded = p.EndIncluded || r.EndIncluded
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// imageStart finds where the kernel image starts among link-time or
// run-time vmlinux symbols: at _text, else _stext, else at the lowest text
// ('T'/'t') symbol. Per-CPU offsets (zero-based on x86_64 before 6.15:
// 0..0x3xxxx in System.map) and absolute symbols lie below it. ok is false
// when the symbols hold no text at all.
type imageStartFinder struct {
	text, stext, lowText    uint64
	hasText, hasS, hasLowTx bool
}

func (s *imageStartFinder) see(addr uint64, kind byte, name []byte) {
	switch {
	case kind != 'T' && kind != 't':
		return
	case string(name) == "_text":
		s.text, s.hasText = addr, true
	case string(name) == "_stext":
		s.stext, s.hasS = addr, true
	}
	if !s.hasLowTx || addr < s.lowText {
		s.lowText, s.hasLowTx = addr, true
	}
}

func (s *imageStartFinder) start() (uint64, bool) {
	switch {
	case s.hasText:
		return s.text, true
	case s.hasS:
		return s.stext, true
	}
	return s.lowText, s.hasLowTx
}

// addrMask returns the mask for addresses printed with width hex digits.
func addrMask(width int) uint64 {
	if width == 8 {
		return 0xffffffff
	}
	return ^uint64(0)
}
