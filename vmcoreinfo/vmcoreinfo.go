package vmcoreinfo

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMissingInfo means VMCOREINFO lacks a key a caller needs: the note is
// fine, the kernel just did not print that line.
var ErrMissingInfo = errors.New("vmcoreinfo: key not present")

// ErrCorrupt means the text is not VMCOREINFO or a line cannot be parsed.
var ErrCorrupt error = &corruptSentinel{"vmcoreinfo: malformed"}

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

// MaxSize caps the text Parse accepts. The kernel's buffer is one page
// (VMCOREINFO_BYTES = PAGE_SIZE); 64 KiB allows the largest page size.
const MaxSize = 64 << 10

// Line is one KEY=VALUE line of the note, in the order the kernel wrote it.
type Line struct {
	Num   int // 1-based line number in the text
	Key   string
	Value string
}

// LineError reports a line whose value does not parse in its key's base.
type LineError struct {
	Num  int
	Line string
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("vmcoreinfo: line %d %q: %v", e.Num, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorrupt.
func (e *LineError) Is(target error) bool { return target == ErrCorrupt || isCorruptClass(target) }

// Info is parsed VMCOREINFO. The zero value holds nothing; use Parse.
type Info struct {
	raw   []byte
	lines []Line
	keys  map[string]int // key → index in lines of its last occurrence
}

// Parse parses VMCOREINFO text. Trailing NUL padding and a missing final
// newline are accepted; lines without '=' and empty lines are kept out of
// Lines but do not fail the parse (the kernel never writes them, and drgn
// skips them too). A value that does not parse in the base its key family
// uses is an error wrapping ErrCorrupt naming the line number, as are text
// larger than MaxSize, NUL bytes inside the text and a missing OSRELEASE.
func Parse(text []byte) (*Info, error) {
	text = bytes.TrimRight(text, "\x00")
	if len(text) > MaxSize {
		return nil, fmt.Errorf("vmcoreinfo: text of %d bytes exceeds %d: %w", len(text), MaxSize, ErrCorrupt)
	}
	if i := bytes.IndexByte(text, 0); i >= 0 {
		return nil, fmt.Errorf("vmcoreinfo: NUL byte at offset %d: %w", i, ErrCorrupt)
	}
	in := &Info{raw: bytes.Clone(text), keys: make(map[string]int)}
	rest := string(in.raw)
	for num := 1; rest != ""; num++ {
		line, tail, _ := strings.Cut(rest, "\n")
		rest = tail
		line = strings.TrimSuffix(line, "\r")
		key, val, ok := strings.Cut(line, "=")
		if !ok || key == "" {
			continue
		}
		l := Line{Num: num, Key: key, Value: val}
		if err := check(l); err != nil {
			return nil, &LineError{Num: num, Line: line, Err: err}
		}
		in.keys[key] = len(in.lines)
		in.lines = append(in.lines, l)
	}
	if v, ok := in.Get("OSRELEASE"); !ok || v == "" {
		return nil, fmt.Errorf("vmcoreinfo: no OSRELEASE line: %w", ErrCorrupt)
	}
	if ps, ok := in.PageSize(); ok && (ps == 0 || ps&(ps-1) != 0) {
		return nil, &LineError{Num: in.lines[in.keys["PAGESIZE"]].Num, Line: "PAGESIZE=" + in.lines[in.keys["PAGESIZE"]].Value, Err: errors.New("page size is not a power of two")}
	}
	return in, nil
}

// check validates a line's value in its family's base, so that the typed
// accessors never meet a malformed number later.
func check(l Line) error {
	var err error
	switch family(l.Key) {
	case "SYMBOL", "KERNELOFFSET", "KERNELOFFPHYS", "SAMODE31", "EAMODE31", "IDENTITYBASE":
		_, err = parseHex(l.Value)
	case "SIZE", "OFFSET", "LENGTH", "PAGESIZE", "CRASHTIME":
		_, err = strconv.ParseUint(l.Value, 10, 64)
	case "NUMBER":
		_, err = parseNumber(l.Value)
	}
	return err
}

// family returns "SYMBOL" for "SYMBOL(x)", and the key itself otherwise.
func family(key string) string {
	if i := strings.IndexByte(key, '('); i > 0 && strings.HasSuffix(key, ")") {
		return key[:i]
	}
	return key
}

func parseHex(s string) (uint64, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	return strconv.ParseUint(s, 16, 64)
}

// parseNumber parses a NUMBER() value: a signed decimal, or 0x-prefixed hex
// (arm64 and NUMBER(VMALLOC_START) print it by hand). Negative values and
// values above 2^63 are kept as 64-bit two's complement.
func parseNumber(s string) (uint64, error) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		return strconv.ParseUint(s[2:], 16, 64)
	}
	if strings.HasPrefix(s, "-") {
		v, err := strconv.ParseInt(s, 10, 64)
		return uint64(v), err
	}
	return strconv.ParseUint(s, 10, 64)
}

// Raw returns the text as given to Parse, without trailing NUL padding.
func (in *Info) Raw() []byte { return in.raw }

// Lines returns every KEY=VALUE line in the order the kernel wrote them,
// unknown keys included. The slice must not be modified.
func (in *Info) Lines() []Line { return in.lines }

// Get returns the raw value of key, e.g. Get("SYMBOL(_stext)"). If a key
// occurs more than once the last occurrence wins, as in drgn.
func (in *Info) Get(key string) (string, bool) {
	if in == nil {
		return "", false
	}
	i, ok := in.keys[key]
	if !ok {
		return "", false
	}
	return in.lines[i].Value, true
}

func (in *Info) get(key string, parse func(string) (uint64, error)) (uint64, bool) {
	v, ok := in.Get(key)
	if !ok {
		return 0, false
	}
	n, err := parse(v)
	return n, err == nil
}

func dec(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

// Symbol returns SYMBOL(name), a runtime (KASLR-applied) address.
func (in *Info) Symbol(name string) (uint64, bool) {
	return in.get("SYMBOL("+name+")", parseHex)
}

// Size returns SIZE(name).
func (in *Info) Size(name string) (uint64, bool) { return in.get("SIZE("+name+")", dec) }

// Offset returns OFFSET(typ.field).
func (in *Info) Offset(typ, field string) (uint64, bool) {
	return in.get("OFFSET("+typ+"."+field+")", dec)
}

// Length returns LENGTH(name).
func (in *Info) Length(name string) (uint64, bool) { return in.get("LENGTH("+name+")", dec) }

// Number returns NUMBER(name) as 64-bit two's complement: a negative value
// such as x86-64's NUMBER(phys_base) reads as a large uint64 and is meant to
// be added modulo 2^64. Use int64(v) for the signed value.
func (in *Info) Number(name string) (uint64, bool) {
	return in.get("NUMBER("+name+")", parseNumber)
}

// Config reports whether CONFIG_name=y is present.
func (in *Info) Config(name string) bool {
	v, ok := in.Get("CONFIG_" + name)
	return ok && v == "y"
}

// OSRelease returns OSRELEASE, the kernel's `uname -r`.
func (in *Info) OSRelease() string { v, _ := in.Get("OSRELEASE"); return v }

// BuildID returns BUILD-ID as text (hex digits), if present. Some stable
// kernels print garbage here (docs/formats.md §2.2); it is returned as found.
func (in *Info) BuildID() (string, bool) { return in.Get("BUILD-ID") }

// PageSize returns PAGESIZE.
func (in *Info) PageSize() (uint64, bool) { return in.get("PAGESIZE", dec) }

// KernelOffset returns KERNELOFFSET, the KASLR slide of the kernel image.
func (in *Info) KernelOffset() (uint64, bool) { return in.get("KERNELOFFSET", parseHex) }

// CrashTime returns CRASHTIME, seconds since the epoch. Only the kdump path
// writes it; a QEMU dump of a panicked guest has none.
func (in *Info) CrashTime() (uint64, bool) { return in.get("CRASHTIME", dec) }

// Arch guesses the architecture from architecture-only lines, for dumps
// whose container does not say: "x86_64", "arm64", "s390x", "riscv64",
// "ppc64" (the 64-bit PowerPC family: the text does not tell ppc64le from
// big-endian ppc64, the note's byte order does), or "" when the lines do
// not decide (i386 prints no architecture lines at all). It is a guess:
// arm64 and riscv64 both print NUMBER(VA_BITS), and only riscv64's own
// lines (arch/riscv/kernel/vmcore_info.c) tell them apart; a container
// that names its machine knows better.
func (in *Info) Arch() string {
	switch {
	case (hasKey(in, "NUMBER(RADIX_MMU)") || hasKey(in, "SYMBOL(mmu_psize_defs)")) && in.symbolAbove("_stext", 1<<32):
		// arch/powerpc/kexec/vmcore_info.c; 32-bit PowerPC prints
		// RADIX_MMU too, with a 32-bit _stext.
		return "ppc64"
	case hasKey(in, "NUMBER(phys_base)") || hasKey(in, "SYMBOL(init_top_pgt)") || hasKey(in, "SYMBOL(init_level4_pgt)") || hasKey(in, "NUMBER(pgtable_l5_enabled)"):
		return "x86_64"
	case hasKey(in, "NUMBER(phys_ram_base)") || hasKey(in, "NUMBER(va_kernel_pa_offset)") || hasKey(in, "NUMBER(KERNEL_LINK_ADDR)"):
		return "riscv64"
	case hasKey(in, "NUMBER(kimage_voffset)") || hasKey(in, "NUMBER(VA_BITS)"):
		return "arm64"
	case hasKey(in, "SYMBOL(lowcore_ptr)") || hasKey(in, "SAMODE31"):
		return "s390x"
	case hasKey(in, "CONFIG_ARM_LPAE"):
		// 32-bit ARM writes only this (arch/arm/kernel/vmcore_info.c), and
		// only with LPAE: a non-LPAE kernel's note names no architecture.
		return "arm"
	}
	return ""
}

func hasKey(in *Info, k string) bool { _, ok := in.Get(k); return ok }

func (in *Info) symbolAbove(name string, v uint64) bool {
	s, ok := in.Symbol(name)
	return ok && s >= v
}

// Require returns the SYMBOL values of names, or an error wrapping
// ErrMissingInfo naming the first one absent.
func (in *Info) Require(names ...string) ([]uint64, error) {
	out := make([]uint64, len(names))
	for i, n := range names {
		v, ok := in.Symbol(n)
		if !ok {
			return nil, fmt.Errorf("vmcoreinfo: SYMBOL(%s): %w", n, ErrMissingInfo)
		}
		out[i] = v
	}
	return out, nil
}

// MissingSymbolError is the error of a decoder whose starting point, a
// kernel symbol, is in neither VMCOREINFO nor the kernel's symbol table (a
// kernel built without CONFIG_KALLSYMS_ALL has no data symbols). It
// matches ErrMissingInfo.
type MissingSymbolError struct {
	// Symbols are the symbols looked for, e.g. ["modules"] or
	// ["__start_BTF", "__stop_BTF"].
	Symbols []string
	// Why says what the absence may mean, e.g. "kallsyms without
	// CONFIG_KALLSYMS_ALL?"; may be empty.
	Why string
}

func (e *MissingSymbolError) Error() string {
	msg := strings.Join(e.Symbols, "/") + " not in the symbol table"
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg
}

// Is reports whether target is ErrMissingInfo.
func (e *MissingSymbolError) Is(target error) bool { return target == ErrMissingInfo }
