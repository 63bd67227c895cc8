package main

import (
	"fmt"
	"strconv"
	"strings"

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
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return s != ""
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
// each symbol of that name (and module) whose size matches, if a size was
// given.
func resolveSymbolic(c *symfinder.Chain, q addrQuery) []uint64 {
	syms, err := c.Find(symfinder.Query{Kind: symfinder.ByName, Name: q.name})
	if err != nil {
		return nil
	}
	var out []uint64
	for _, s := range syms {
		if !moduleMatches(q.module, s.Module) || q.sized && s.Size != q.size {
			continue
		}
		out = append(out, s.Addr+q.off)
	}
	return out
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
