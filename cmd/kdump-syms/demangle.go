package main

import (
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// demangleName returns a Rust symbol's readable path: v0 names ("_R…",
// what 7.x kernels carry) and legacy ones ("_ZN…E" with a hash), through
// the demangler Go's own tools use. Other names, and names it cannot
// read, come back as they are.
func demangleName(n string) string {
	if !strings.HasPrefix(n, "_R") && !strings.HasPrefix(n, "_ZN") {
		return n
	}
	// A compiler suffix (".llvm.123", ".cold") is kept as it is: the
	// demangler would drop it, and it tells such copies apart.
	base, suffix := n, ""
	if i := strings.IndexByte(n, '.'); i > 0 {
		base, suffix = n[:i], n[i:]
	}
	d, err := demangle.ToString(base)
	if err != nil || d == "" || strings.ContainsAny(d, "\n\r\t") {
		return n
	}
	return d + suffix
}

// formatter returns how addr and oops output print a symbol at an
// address: %pS, with the name demangled under --demangle.
func (c *common) formatter() func(symfinder.Symbol, uint64) string {
	if !c.demangle {
		return symfinder.Symbol.Format
	}
	return func(s symfinder.Symbol, addr uint64) string {
		s.Name = demangleName(s.Name)
		return s.Format(addr)
	}
}
