package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/oops"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// addrQuery is one argument of "addr": an address, or a symbolic location
// "name+0xoff" (with an optional "/0xsize", and a module as " [mod]" or
// "mod:name") to resolve in reverse.
type addrQuery struct {
	arg    string
	addr   uint64
	symbol bool
	name   string
	module string // "" any; "vmlinux" the core kernel
	off    uint64
	size   uint64
	sized  bool
	bare   bool // NAME alone: the symbol's start
}

// parseAddrArg reads an argument of "addr". An address is 1 to 16 hex
// digits, optionally 0x-prefixed; anything else must be symbolic, with a
// '+'. Errors name the argument.
func parseAddrArg(a string) (addrQuery, error) {
	q := addrQuery{arg: a}
	s := strings.TrimSpace(a)
	if v, ok := parseHexArg(s); ok {
		q.addr = v
		return q, nil
	}
	bad := func(why string) (addrQuery, error) {
		return q, usagef("addr: %q is not an address (%s): want 1 to 16 hex digits, 0x optional, or NAME+0xOFF [MODULE]", a, why)
	}
	if !strings.Contains(s, "+") {
		// A bare name: the symbol itself, as crash's "sym NAME" answers
		// (a name that reads as hex is an address: write NAME+0).
		if n := strings.TrimSpace(strings.SplitN(s, " [", 2)[0]); oops.IsSymbolName(n) || strings.Count(n, ":") == 1 && oops.IsSymbolName(n[strings.IndexByte(n, ':')+1:]) {
			sym := s + "+0"
			if i := strings.Index(s, " ["); i >= 0 {
				sym = s[:i] + "+0" + s[i:]
			}
			q, err := parseAddrArg(sym)
			q.arg, q.bare = a, true
			return q, err
		}
		switch {
		case s == "":
			return bad("empty")
		case strings.HasPrefix(s, "-"):
			return bad("negative")
		case strings.HasPrefix(strings.ToLower(s), "0x") && len(s) == 2:
			return bad("no digits after 0x")
		case isAllHex(strings.TrimPrefix(strings.ToLower(s), "0x")):
			return bad("more than 16 hex digits")
		}
		return bad("not hexadecimal")
	}
	q.symbol = true
	if i := strings.Index(s, " ["); i >= 0 && strings.HasSuffix(s, "]") {
		q.module = strings.TrimSpace(s[i+2 : len(s)-1])
		s = strings.TrimSpace(s[:i])
	}
	if mod, rest, ok := strings.Cut(s, ":"); ok && !strings.Contains(mod, "+") {
		if q.module != "" && q.module != mod {
			return bad("two different modules")
		}
		q.module, s = mod, rest
	}
	name, rest, _ := strings.Cut(s, "+")
	if name == "" || strings.ContainsAny(name, " \t[]/") {
		return bad("no symbol name before +")
	}
	q.name = name
	offText, sizeText, sized := strings.Cut(rest, "/")
	off, ok := parseOffset(offText)
	if !ok {
		return bad("bad offset")
	}
	q.off = off
	if sized {
		size, ok := parseOffset(sizeText)
		if !ok {
			return bad("bad size")
		}
		q.size, q.sized = size, true
	}
	return q, nil
}

func isAllHex(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdefABCDEF") == ""
}

// parseHexArg parses 1 to 16 hex digits with an optional 0x.
func parseHexArg(s string) (uint64, bool) {
	h := s
	if strings.HasPrefix(h, "0x") || strings.HasPrefix(h, "0X") {
		h = h[2:]
	}
	if h == "" || len(h) > 16 || !isAllHex(h) {
		return 0, false
	}
	v, err := strconv.ParseUint(h, 16, 64)
	return v, err == nil
}

// parseOffset reads an offset as the kernel prints it (0x-prefixed hex)
// or in decimal.
func parseOffset(s string) (uint64, bool) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		return parseHexArg(s)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// moduleMatches reports whether a symbol of module m passes a --module or
// "mod:" filter: "" passes all, "vmlinux" the core kernel.
func moduleMatches(filter, m string) bool {
	switch filter {
	case "":
		return true
	case "vmlinux":
		return m == ""
	}
	return m == filter
}

// resolveSymbolic finds the addresses a symbolic query names: name+off in
// each symbol of that name (and module). It never slides to a neighbour:
// an offset past a symbol's end, or a size other than the symbol's, is no
// answer, and why says so (naming the size the dump gives) when nothing
// is found.
func resolveSymbolic(c oops.Resolver, q addrQuery) (addrs []uint64, why string) {
	syms, err := c.Find(symfinder.Query{Kind: symfinder.ByName, Name: q.name})
	var nf *symfinder.NotFoundError
	if errors.As(err, &nf) && len(nf.Unconsulted) > 0 {
		// Not in the finders that worked; the failure is reported apart.
		return nil, fmt.Sprintf("no symbol %s%s in the finders that could be read", q.name, moduleSuffix(q.module))
	}
	var reasons []string
	for _, s := range syms {
		if !moduleMatches(q.module, s.Module) {
			continue
		}
		where := s.Name
		if s.Module != "" {
			where += " [" + s.Module + "]"
		}
		switch {
		case q.sized && s.Size != 0 && s.Size != q.size:
			reasons = append(reasons, fmt.Sprintf("%s is %#x long in this dump, not %#x: the text is from another build", where, s.Size, q.size))
		case s.Size != 0 && q.off > s.Size:
			// (The end itself is the kernel's too: a return address after
			// a function's last call prints as sym+size/size.)
			reasons = append(reasons, fmt.Sprintf("offset %#x is past the end of %s (%#x long)", q.off, where, s.Size))
		default:
			addrs = append(addrs, s.Addr+q.off)
		}
	}
	switch {
	case len(addrs) > 0:
		return addrs, ""
	case len(reasons) > 0:
		return nil, strings.Join(reasons, "; ")
	}
	return nil, fmt.Sprintf("no symbol %s%s", q.name, moduleSuffix(q.module))
}

// splitModuleName reads "mod:name" for "name"; a name without a colon, or
// with one as Rust paths have ("a::b"), is taken whole.
func splitModuleName(n string) (module, name string) {
	if mod, rest, ok := strings.Cut(n, ":"); ok && mod != "" && rest != "" && !strings.HasPrefix(rest, ":") {
		return mod, rest
	}
	return "", n
}

func (q addrQuery) String() string {
	if !q.symbol {
		return fmt.Sprintf("%#x", q.addr)
	}
	return q.arg
}

// negativeAddress reports an argument such as "-1", which the flag parser
// would take for an unknown flag, as the bad address it is.
func negativeAddress(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if len(a) > 1 && a[0] == '-' && '0' <= a[1] && a[1] <= '9' {
			_, err := parseAddrArg(a)
			return err
		}
	}
	return nil
}
