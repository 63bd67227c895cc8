// Package oops annotates kernel text as people paste it (oopses,
// warnings, stack dumps, register dumps, with or without dmesg and journal
// prefixes), line by line, over a symbol chain: it adds symbols and
// nothing else, and, with a Check, flags what the text says that the dump
// contradicts (frames, release, KASLR offset) — the reader behind
// "kdump-syms addr VMCORE -" and dmesg --symbolize.
//
// The forms it knows, by kernel generation:
//
//   - 2.6–4.x x86 frames: " [<ffffffff8110a2b4>] ? do_sys_open+0x14/0x60 [mod]"
//     (the symbol already there is kept; a frame without one gets it);
//   - 3.x "RIP: 0010:[<addr>]  [<addr>] sym+off/size", and 4.x+ "RIP:
//     0010:sym+off/size" (%pS: looked up as is);
//   - 4.x+ symbolic frames " ? sym+off/size [mod]" and bare " ? 0xaddr"
//     for addresses the kernel could not name (x86's %pB: return
//     addresses, looked up at addr-1 so that a call ending a function is
//     not blamed on the next one, the offset printed from addr as the
//     kernel does; arm64 and s390x print frames with %pS, looked up as
//     they are);
//   - arm64 "pc : sym+off/size", "lr : sym+off/size" and the 4.x "pc :
//     [<addr>] lr : [<addr>] pstate: ..." lines (%pS);
//   - register dumps ("RAX: ffffffff81e0a3c0 RBX: ..."): a value that
//     lies in a symbol gets it, as crash's "bt -s" shows, others not;
//   - arm's "[<addr>] (sym) from [<addr>] (sym+off/size)" and powerpc's
//     "[sp] [addr] sym+off/size" keep the symbols they have;
//   - "Code:" lines are left exactly as they are.
//
// With addresses set, each symbolic "sym+off/size [mod]" gets its address
// inserted before it ("[<ffffffff8110a2b4>] do_sys_open+0x14/0x60"),
// found by a reverse lookup that must be unambiguous (the size must match
// when the name is not unique), so the trace can go to objdump or gdb.
package oops

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Resolver is what the annotator needs of a chain (*symfinder.Chain has
// it).
type Resolver interface {
	Lookup(addr uint64) (symfinder.Symbol, error)
	Find(q symfinder.Query) ([]symfinder.Symbol, error)
}

// Options say how to read and annotate text.
type Options struct {
	// Resolver answers lookups: the dump's chain.
	Resolver Resolver
	// Digits is how many hex digits a bare kernel address has in the
	// text: 16 on 64-bit kernels, 8 on 32-bit ones.
	Digits int
	// MinAddr: lower addresses are not looked up (user space); 1<<63 on
	// 64-bit kernels, 0x80000000 on 32-bit, 0 on s390x.
	MinAddr uint64
	// Addresses inserts "[<addr>] " before each symbolic frame, found by an
	// unambiguous reverse lookup, for objdump or gdb.
	Addresses bool
	// ReturnAddrs: call-trace frames are return addresses printed with %pB
	// and looked up at addr-1 (x86); other architectures print frames with
	// %pS, looked up as they are.
	ReturnAddrs bool
	// Format prints a symbol at an address; nil is Symbol.Format.
	Format func(symfinder.Symbol, uint64) string
	// Check, when set, compares the text with the dump and keeps the
	// count (see Check).
	Check *Check
}

// New returns an annotator.
func New(opt Options) *Annotator {
	if opt.Format == nil {
		opt.Format = symfinder.Symbol.Format
	}
	return &Annotator{r: opt.Resolver, digits: opt.Digits, minAddr: opt.MinAddr, addresses: opt.Addresses,
		returnAddrs: opt.ReturnAddrs, format: opt.Format, check: opt.Check}
}

// Resolved and Unresolved count the addresses looked up so far that a
// symbol holds, and the frame and instruction-pointer addresses none does.
func (o *Annotator) Resolved() int   { return o.resolved }
func (o *Annotator) Unresolved() int { return o.unresolved }

// Annotator symbolizes text line by line. It keeps whether the lines so
// far are inside a call trace. It is not safe for concurrent use.
type Annotator struct {
	r         Resolver
	digits    int    // hex digits of a bare address: 16 (64-bit) or 8
	minAddr   uint64 // lower addresses are not looked up (user space)
	addresses bool   // add addresses to symbolic frames
	// returnAddrs: call-trace frames are return addresses printed with
	// %pB, looked up at addr-1 (x86); other architectures print their
	// frames with %pS (arm64, s390x: a call ending a function shows as
	// the next one's +0x0) and are looked up as they are.
	returnAddrs bool
	format      func(symfinder.Symbol, uint64) string

	inTrace bool

	resolved, unresolved int

	// check, where set, compares what the text says with the dump: every
	// frame that has a symbol, the release and the KASLR offset. A
	// disagreement is flagged at the end of its line and counted.
	check *Check
}

// Check is what the text is checked against (Release, KASLR), and what
// it found (Summary).
type Check struct {
	Release  string // the dump's OSRELEASE; "" unknown
	KASLR    uint64 // the dump's KASLR offset, when HasKASLR
	HasKASLR bool
	// frames is how many symbolic frames were checked; disagree how many
	// of them the dump contradicts.
	frames, disagree int
	// facts are the release and KASLR lines that disagree, once each.
	facts []string
}

// Summary returns one line saying how the text disagrees with the dump,
// "" when it does not.
func (c *Check) Summary() string {
	if c == nil || c.disagree == 0 && len(c.facts) == 0 {
		return ""
	}
	parts := slices.Clone(c.facts)
	if c.disagree > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d symbolic frames disagree with it (flagged on their lines)", c.disagree, c.frames))
	}
	return "the text does not match this dump: " + strings.Join(parts, "; ")
}

// insertion is text added at a byte offset of a line.
type insertion struct {
	at   int
	text string
}

// Stream copies r to w line by line, flushing each line before it
// reads the next, so that it can follow "dmesg -w" or serve as a
// coprocess.
func (o *Annotator) Stream(r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for {
		line, rerr := br.ReadString('\n')
		if len(line) > 0 {
			if _, err := bw.WriteString(o.Line(line)); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// Line returns line with its insertions applied.
func (o *Annotator) Line(line string) string {
	ins := o.annotate(line)
	if len(ins) == 0 {
		return line
	}
	var b strings.Builder
	last := 0
	for _, in := range ins {
		b.WriteString(line[last:in.at])
		b.WriteString(in.text)
		last = in.at
	}
	b.WriteString(line[last:])
	return b.String()
}

// registerLabels mark a line of register values, whose addresses are
// looked up as they are (%pS), never as return addresses.
var registerLabels = []string{"RIP:", "RSP:", "RAX:", "RDX:", "RBP:", "R10:", "R13:", "FS:", "CS:", "CR2:",
	"EIP:", "EAX:", "ESI:", "pc :", "lr :", "sp :", "x29:", "x1 :", "PC is at", "LR is at", "pstate:",
	"NIP:", "LR:", "CTR:", "GPR", "Krnl PSW", "epc :", "ra :"}

func isRegisterLine(s string) bool {
	for _, l := range registerLabels {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// traceMarkers start a call trace; the lines after it are frames until a
// line that has no frame in it.
func startsTrace(s string) bool {
	return strings.Contains(s, "Call Trace:") || strings.Contains(s, "Call trace:") || strings.Contains(s, "Backtrace:") ||
		strings.Contains(s, "Exception stack(")
}

// armFrame matches a 32-bit ARM trace line, "callee from caller+off/size"
// (arch/arm/kernel/traps.c, dump_backtrace_entry), which 6.1 and earlier
// print with no "Call trace:" line before the first.
var armFrame = regexp.MustCompile(`^(?:\[[ 0-9.]+\] )?\s*[A-Za-z0-9_.]+ from [A-Za-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+`)

// annotate returns the insertions for line, in order.
func (o *Annotator) annotate(line string) []insertion {
	if strings.Contains(line, "Code: ") {
		o.inTrace = false
		return nil
	}
	if startsTrace(line) {
		o.inTrace = true
		return nil
	}
	if armFrame.MatchString(line) {
		o.inTrace = true
	}
	regs := isRegisterLine(line)
	if regs {
		o.inTrace = false
	}
	var flags []string
	if o.check != nil {
		flags = o.checkFacts(line)
	}
	toks := scanTokens(line, o.digits)
	if o.inTrace && !regs && len(toks) == 0 && !isTraceMarkerLine(line) {
		o.inTrace = false
	}
	var ins []insertion
	for k, t := range toks {
		switch t.kind {
		case tokSymbol:
			if o.check != nil && !regs {
				prev, hasAddr := token{}, k > 0 && toks[k-1].kind == tokAddr && t.gapOnly(line, toks[k-1])
				if hasAddr {
					prev = toks[k-1]
				}
				if f := o.checkFrame(t, prev.addr, hasAddr, prev.bracket || o.inTrace); f != "" {
					flags = append(flags, f)
				}
			}
			// "[<addr>] ? sym": the frame has its address already.
			if o.addresses && !(k > 0 && toks[k-1].kind == tokAddr && t.gapOnly(line, toks[k-1])) {
				if a, ok := o.reverse(t); ok {
					ins = append(ins, insertion{at: t.start, text: fmt.Sprintf("[<%0*x>] ", o.digits, a)})
				}
			}
		case tokAddr:
			if t.addr < o.minAddr {
				continue
			}
			// A symbol right after the address (the frame already has
			// one), or the same address again (3.x "RIP: 0010:[<a>]
			// [<a>] sym"): nothing to add.
			if k+1 < len(toks) && toks[k+1].gapOnly(line, t) || parenSymbolAfter(line, t.end) {
				continue
			}
			frame := !regs && (t.bracket || o.inTrace)
			sym, ok := o.lookup(t.addr, frame && o.returnAddrs)
			if !ok {
				if frame || regs && strings.Contains(line[:t.start], "IP:") {
					o.unresolved++
				}
				continue
			}
			o.resolved++
			text := o.format(sym, t.addr)
			if strings.ContainsAny(text, "\r\n") {
				continue
			}
			ins = append(ins, insertion{at: t.end, text: " " + text})
		}
	}
	if len(flags) > 0 {
		end := len(strings.TrimRight(line, "\r\n"))
		ins = append(ins, insertion{at: end, text: "  [kdump-syms: " + strings.Join(flags, "; ") + "]"})
	}
	return ins
}

// checkFrame compares a symbolic frame with the dump: with its address
// (addr, when hasAddr), the symbol there must be the one printed, at the
// printed offset and size; without, a symbol of that name and size must
// exist, long enough for the offset. It returns what disagrees, "" when
// nothing does.
func (o *Annotator) checkFrame(t token, addr uint64, hasAddr, frame bool) string {
	c := o.check
	c.frames++
	printed := t.name + moduleBrackets(t.module)
	if hasAddr {
		sym, ok := o.lookup(addr, frame && o.returnAddrs)
		if !ok {
			c.disagree++
			return fmt.Sprintf("no symbol at %#x in this dump", addr)
		}
		if sym.Name != t.name || sym.Module != t.module || addr-sym.Addr != t.off || t.hasSize && sym.Size != 0 && sym.Size != t.size {
			c.disagree++
			return fmt.Sprintf("%#x is %s in this dump", addr, o.format(sym, addr))
		}
		return ""
	}
	syms, err := o.r.Find(symfinder.Query{Kind: symfinder.ByName, Name: t.name})
	var nf *symfinder.NotFoundError
	if errors.As(err, &nf) && len(nf.Unconsulted) > 0 {
		return "" // a finder failed: the dump cannot say (reported apart)
	}
	var sizes []string
	for _, s := range syms {
		if s.Module != t.module {
			continue
		}
		if (!t.hasSize || s.Size == 0 || s.Size == t.size) && (s.Size == 0 || t.off <= s.Size) {
			return ""
		}
		sizes = append(sizes, fmt.Sprintf("%#x", s.Size))
	}
	c.disagree++
	if len(sizes) == 0 {
		return "no " + printed + " in this dump"
	}
	return fmt.Sprintf("%s is %s long in this dump", printed, strings.Join(sizes, ", "))
}

func moduleBrackets(m string) string {
	if m == "" {
		return ""
	}
	return " [" + m + "]"
}

// checkFacts compares the release of a dump_stack header ("CPU: 0 PID: 1
// Comm: sh Not tainted 6.12.117+deb13-amd64 #1 Debian 6.12.117-1", the
// release right before " #") and a panic's "Kernel Offset: 0x%lx from
// 0x%lx" with the dump, and returns what disagrees (each fact counted
// once in the summary).
func (o *Annotator) checkFacts(line string) []string {
	c := o.check
	var flags []string
	note := func(fact, flag string) {
		if !slices.Contains(c.facts, fact) {
			c.facts = append(c.facts, fact)
		}
		flags = append(flags, flag)
	}
	if c.Release != "" && strings.Contains(line, "PID: ") && strings.Contains(line, "Comm: ") {
		if rel := releaseBeforeHash(line); rel != "" && rel != c.Release {
			note(fmt.Sprintf("release %s, this dump %s", rel, c.Release), "this dump is "+c.Release)
		}
	}
	if c.HasKASLR {
		if i := strings.Index(line, "Kernel Offset: 0x"); i >= 0 {
			if v, _, ok := hexAt(line, i+len("Kernel Offset: 0x")); ok && v != c.KASLR {
				note(fmt.Sprintf("Kernel Offset %#x, this dump %#x", v, c.KASLR), fmt.Sprintf("this dump's is %#x", c.KASLR))
			}
		}
	}
	return flags
}

// releaseBeforeHash returns the word before the first " #" of line that
// reads as a kernel release (a digit first, a dot in it), "" if none.
func releaseBeforeHash(line string) string {
	for rest := line; ; {
		i := strings.Index(rest, " #")
		if i < 0 {
			return ""
		}
		words := strings.Fields(rest[:i])
		if len(words) > 0 {
			w := words[len(words)-1]
			if w[0] >= '0' && w[0] <= '9' && strings.Contains(w, ".") {
				return w
			}
		}
		rest = rest[i+2:]
	}
}

// isTraceMarkerLine reports a call trace's <IRQ>, <TASK>, </TASK>, <NMI>,
// <EOI> lines, which keep the trace going.
func isTraceMarkerLine(s string) bool {
	i := strings.IndexByte(s, '<')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(s[i:], '>')
	if j < 0 {
		return false
	}
	m := strings.TrimPrefix(s[i+1:i+j], "/")
	return m == "TASK" || m == "IRQ" || m == "NMI" || m == "EOI" || m == "EOE" || m == "SOFTIRQ" || m == "#DF" || m == "DB" ||
		strings.HasPrefix(m, "#")
}

// lookup resolves addr; a frame's return address is looked up at addr-1,
// as the kernel's %pB does.
func (o *Annotator) lookup(addr uint64, frame bool) (symfinder.Symbol, bool) {
	q := addr
	if frame && q > 0 {
		q--
	}
	sym, err := o.r.Lookup(q)
	if err != nil {
		return symfinder.Symbol{}, false
	}
	return sym, true
}

// reverse finds the address a symbolic "name+off/size [mod]" names: the one
// symbol of that name (in that module), or the one of them with that size.
func (o *Annotator) reverse(t token) (uint64, bool) {
	syms, err := o.r.Find(symfinder.Query{Kind: symfinder.ByName, Name: t.name})
	if err != nil {
		return 0, false
	}
	var cands []symfinder.Symbol
	for _, s := range syms {
		if s.Module == t.module {
			cands = append(cands, s)
		}
	}
	if len(cands) > 1 && t.hasSize {
		var sized []symfinder.Symbol
		for _, s := range cands {
			if s.Size == t.size {
				sized = append(sized, s)
			}
		}
		cands = sized
	}
	if len(cands) != 1 || t.off > cands[0].Size && cands[0].Size != 0 {
		return 0, false
	}
	return cands[0].Addr + t.off, true
}

type tokKind uint8

const (
	tokAddr   tokKind = iota + 1 // a hex address, bare, 0x-prefixed or in [<...>]
	tokSymbol                    // name+0xoff/0xsize, optionally " [module]"
)

// token is an address or a symbolic location found in a line: line[start:end].
type token struct {
	kind       tokKind
	start, end int
	addr       uint64
	bracket    bool // [<addr>]
	name       string
	module     string
	off, size  uint64
	hasSize    bool
}

// gapOnly reports whether t follows prev with only blanks and a "? "
// between them, and says the same thing again: a symbol, or the same
// address.
func (t token) gapOnly(line string, prev token) bool {
	// Blanks, a "?", and the brackets of other architectures' frames:
	// powerpc's "[sp] [addr] sym", arm's "[<addr>] (sym+off/size)".
	gap := strings.Trim(line[prev.end:t.start], " \t]")
	if gap != "" && gap != "?" && gap != "(" && gap != "? (" {
		return false
	}
	return t.kind == tokSymbol || t.kind == tokAddr && t.addr == prev.addr
}

// parenSymbolAfter reports arm's "[<addr>] (name)" (%ps: a name without an
// offset) right after an address: the frame has its symbol.
func parenSymbolAfter(line string, end int) bool {
	rest := strings.TrimLeft(line[end:], " \t")
	if !strings.HasPrefix(rest, "(") {
		return false
	}
	rp := strings.IndexByte(rest, ')')
	if rp < 2 {
		return false
	}
	name := rest[1:rp]
	if !isNameStart(name[0]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isWord(name[i]) {
			return false
		}
	}
	return true
}

// IsSymbolName reports whether s reads as a kernel symbol name: a letter,
// '_', '.' or '$', then letters, digits, '_', '.' or '$'.
func IsSymbolName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWord(s[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isWord(c byte) bool {
	return isHex(c) || c == '_' || 'g' <= c && c <= 'z' || 'G' <= c && c <= 'Z' || c == '.' || c == '$'
}

func isNameStart(c byte) bool {
	return c == '_' || c == '.' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// scanTokens finds the addresses (exactly digits hex digits, or 0x and 1
// to 16 hex digits, or either in "[<...>]", not part of a longer word) and
// the symbolic locations of line, in order.
func scanTokens(line string, digits int) []token {
	var out []token
	for i := 0; i < len(line); {
		if i > 0 && isWord(line[i-1]) {
			i++
			continue
		}
		if t, ok := scanSymbol(line, i); ok {
			out = append(out, t)
			i = t.end
			continue
		}
		if t, ok := scanAddr(line, i, digits); ok {
			out = append(out, t)
			i = t.end
			continue
		}
		i++
	}
	return out
}

func scanAddr(line string, i, digits int) (token, bool) {
	start := i
	bracket := strings.HasPrefix(line[i:], "[<")
	if bracket {
		i += 2
	}
	prefixed := strings.HasPrefix(line[i:], "0x") || strings.HasPrefix(line[i:], "0X")
	if prefixed {
		i += 2
	}
	j := i
	for j < len(line) && isHex(line[j]) {
		j++
	}
	n := j - i
	switch {
	case n == 0 || n > 16:
		return token{}, false
	case !prefixed && !bracket && n != digits:
		return token{}, false
	case j < len(line) && isWord(line[j]):
		return token{}, false
	}
	v, err := strconv.ParseUint(line[i:j], 16, 64)
	if err != nil {
		return token{}, false
	}
	end := j
	if bracket {
		if !strings.HasPrefix(line[j:], ">]") {
			return token{}, false
		}
		end += 2
	} else if start > 1 && line[start-2:start] == "[<" {
		return token{}, false // handled with the bracket
	}
	return token{kind: tokAddr, start: start, end: end, addr: v, bracket: bracket}, true
}

// scanSymbol reads "name+0xoff/0xsize" (the size optional, as some
// printers leave it out) and a following " [module]".
func scanSymbol(line string, i int) (token, bool) {
	if !isNameStart(line[i]) {
		return token{}, false
	}
	j := i
	for j < len(line) && isWord(line[j]) {
		j++
	}
	name := line[i:j]
	if !strings.HasPrefix(line[j:], "+0x") {
		return token{}, false
	}
	off, k, ok := hexAt(line, j+3)
	if !ok {
		return token{}, false
	}
	t := token{kind: tokSymbol, start: i, name: name, off: off}
	if strings.HasPrefix(line[k:], "/0x") {
		size, m, ok := hexAt(line, k+3)
		if !ok {
			return token{}, false
		}
		t.size, t.hasSize, k = size, true, m
	}
	if k < len(line) && isWord(line[k]) {
		return token{}, false
	}
	t.end = k
	if strings.HasPrefix(line[k:], " [") {
		if e := strings.IndexByte(line[k+2:], ']'); e > 0 {
			mod := line[k+2 : k+2+e]
			// "[xfs]", or "[xfs 1234abcd]" with a build ID (5.14+).
			name, _, _ := strings.Cut(mod, " ")
			if validModuleName(name) {
				t.module, t.end = name, k+3+e
			}
		}
	}
	return t, true
}

func validModuleName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(isWord(c) || c == '-') {
			return false
		}
	}
	return true
}

func hexAt(s string, i int) (uint64, int, bool) {
	j := i
	for j < len(s) && isHex(s[j]) {
		j++
	}
	if j == i || j-i > 16 {
		return 0, i, false
	}
	v, err := strconv.ParseUint(s[i:j], 16, 64)
	return v, j, err == nil
}
