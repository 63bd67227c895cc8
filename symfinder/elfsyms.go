package symfinder

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unsafe"
)

// OpenELFSymbols reads the symbol table of the vmlinux ELF file at path,
// as [NewELFSymbols] does, naming the finder after path. The file is
// closed before it returns.
func OpenELFSymbols(path string, slide uint64) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("symfinder: %w", err)
	}
	defer f.Close()
	return NewELFSymbols(f, path, slide)
}

// NewELFSymbols reads the symbol table (.symtab) of a vmlinux ELF file,
// 32- or 64-bit, either byte order, into a sized [Index] named name: sizes
// are the symbols' st_size, not derived.
//
// Each symbol gets the letter nm(1) prints for it, which is what
// System.map and the kernel's scripts/kallsyms hold: by section flags 't'
// (executable), 'r' (allocated, read-only), 'd' (allocated, writable),
// 'b' (no bits: .bss), 'N' (debugging), 'n' (other read-only); 'a' for
// absolute and 'C' for common symbols; upper case when the binding is
// global. Weak symbols are 'V' (objects) or 'W', GNU indirect functions
// 'i' and unique globals 'u'. Undefined symbols (nm's U, w, v) are skipped,
// as System.map drops them, and so are the symbols nm hides (section and
// file symbols, empty names) and the mapping symbols kallsyms drops ("$x",
// "$d", ".L…", "L0…").
//
// slide, the dump's KASLR offset, is added modulo the address width to the
// symbols of the kernel image: not to absolute symbols nor to those below
// the image's start (_text, else _stext, else the lowest text symbol), as
// in [ParseSystemMap].
//
// A file that is not ELF or whose headers are malformed is an error
// wrapping [ErrCorrupt] (debug/elf's panics on hostile input are recovered
// into it too); a file without .symtab is an error wrapping
// [elf.ErrNoSymbols].
func NewELFSymbols(r io.ReaderAt, name string, slide uint64) (ix *Index, err error) {
	defer func() {
		// debug/elf is not hardened against hostile input and can panic
		// (cilium/ebpf's SafeELFFile guards it the same way).
		if p := recover(); p != nil {
			ix, err = nil, fmt.Errorf("symfinder: %s: debug/elf panicked: %v: %w", name, p, ErrCorrupt)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, elfError(name, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, elfError(name, err)
	}
	mask := ^uint64(0)
	if f.Class == elf.ELFCLASS32 {
		mask = 0xffffffff
	}

	// Pass 1: letters, the image start and the name bytes to reserve.
	kinds := make([]byte, len(syms))
	var start imageStartFinder
	n, nameBytes := 0, 0
	for i := range syms {
		s := &syms[i]
		kinds[i] = nmLetter(f, s)
		if kinds[i] == 0 {
			continue
		}
		start.see(s.Value, kinds[i], unsafeBytes(s.Name))
		n++
		nameBytes += len(s.Name)
	}
	imageStart, hasText := start.start()

	b := NewBuilder(name, "")
	b.Grow(n, nameBytes)
	sect := map[string]uint64{}
	for i := range syms {
		s, k := &syms[i], kinds[i]
		if k == 0 {
			continue
		}
		addr := s.Value
		if !isAbsolute(k) && (!hasText || addr >= imageStart) {
			addr = (addr + slide) & mask
		}
		b.AddSized(addr, s.Size, k, unsafeBytes(s.Name))
		if IsKernelSectionName(unsafeBytes(s.Name)) {
			if _, dup := sect[s.Name]; !dup {
				sect[s.Name] = addr
			}
		}
	}
	// A vmlinux holds every data symbol: it answers as a kernel built
	// with CONFIG_KALLSYMS_ALL does.
	if rs := KernelRanges(func(n string) (uint64, bool) { v, ok := sect[n]; return v, ok }, false); rs != nil {
		b.SetExtents(rs, func(kind byte, _ []byte) bool { return isAbsolute(kind) })
	}
	return b.Build()
}

func elfError(name string, err error) error {
	var fe *elf.FormatError
	if errors.As(err, &fe) {
		return fmt.Errorf("symfinder: %s: %w: %w", name, ErrCorrupt, err)
	}
	return fmt.Errorf("symfinder: %s: %w", name, err)
}

// unsafeBytes views s as bytes for the Builder, which only copies them.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// isMappingSymbol reports the names the kernel's kallsyms drops
// (is_mapping_symbol in include/linux/module_symbol.h, kernel 6.2+): ARM
// and RISC-V mapping symbols and local labels.
func isMappingSymbol(name string) bool {
	return strings.HasPrefix(name, "$") || strings.HasPrefix(name, ".L") || strings.HasPrefix(name, "L0")
}

// nmLetter returns the letter nm prints for s (binutils'
// bfd_decode_symclass over the section flags BFD derives from ELF), or 0
// for a symbol to skip.
func nmLetter(f *elf.File, s *elf.Symbol) byte {
	typ, bind := elf.ST_TYPE(s.Info), elf.ST_BIND(s.Info)
	if typ == elf.STT_SECTION || typ == elf.STT_FILE || s.Name == "" || isMappingSymbol(s.Name) {
		return 0
	}
	switch s.Section {
	case elf.SHN_UNDEF:
		return 0
	case elf.SHN_COMMON:
		return 'C'
	}
	if typ == elf.STT_GNU_IFUNC {
		return 'i'
	}
	switch bind {
	case elf.STB_WEAK:
		if typ == elf.STT_OBJECT {
			return 'V'
		}
		return 'W'
	case elf.STB_LOOS: // STB_GNU_UNIQUE
		return 'u'
	case elf.STB_LOCAL, elf.STB_GLOBAL:
	default:
		return '?'
	}
	var c byte
	switch {
	case s.Section == elf.SHN_ABS:
		c = 'a'
	case s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(f.Sections):
		return '?'
	default:
		c = sectionLetter(f.Sections[s.Section])
	}
	if bind == elf.STB_GLOBAL && 'a' <= c && c <= 'z' {
		c -= 'a' - 'A'
	}
	return c
}

// sectionLetter is binutils' decode_section_type for an ELF section: code,
// then loaded data (read-only or not), then no contents, then debugging,
// then read-only contents.
func sectionLetter(sec *elf.Section) byte {
	contents := sec.Type != elf.SHT_NOBITS
	alloc := sec.Flags&elf.SHF_ALLOC != 0
	readonly := sec.Flags&elf.SHF_WRITE == 0
	switch {
	case sec.Flags&elf.SHF_EXECINSTR != 0:
		return 't'
	case alloc && contents:
		if readonly {
			return 'r'
		}
		return 'd'
	case !contents:
		return 'b'
	case isDebugSection(sec.Name):
		return 'N'
	case readonly:
		return 'n'
	}
	return '?'
}

func isDebugSection(name string) bool {
	for _, p := range [...]string{".debug", ".zdebug", ".gnu.linkonce.wi.", ".line", ".stab"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
