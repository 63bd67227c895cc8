package modsyms

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Elf_Sym field offsets (the ELF ABI; not taken from the layout source).
type elfSym struct {
	size                             uint64
	name, info, shndx, value, stsize uint64
}

var (
	elf64Sym = elfSym{size: 24, name: 0, info: 4, shndx: 6, value: 8, stsize: 16}
	elf32Sym = elfSym{size: 16, name: 0, value: 4, stsize: 8, info: 12, shndx: 14}
)

// symSource is where a module's symbols are: what symbols reads, taken
// from its struct module (and struct mod_kallsyms) during the walk.
type symSource struct {
	symtab, num, strtab, typetab uint64
	hasTypes                     bool
	syms, numSyms                uint64 // mod->syms, mod->num_syms
}

// symSource reads where the module's symbols are from its struct module in
// buf and, on v4.5+, its struct mod_kallsyms; it sets m.NumSymtab.
func (ld *loader) symSource(m *Module, buf []byte) (symSource, error) {
	l := ld.l
	var src symSource
	if l.syms.ok {
		src.syms, _ = ld.uint(buf, l.syms)
		src.numSyms, _ = ld.uint(buf, l.numSyms)
	}
	if l.direct {
		src.symtab, _ = ld.uint(buf, l.symtab)
		src.num, _ = ld.uint(buf, l.numSymtab)
		src.strtab, _ = ld.uint(buf, l.strtab)
	} else {
		kp, _ := ld.uint(buf, l.kallsyms)
		if kp == 0 {
			return src, corrupt("kallsyms pointer is NULL")
		}
		mk := slices.Grow(ld.mkBuf[:0], int(l.mkRead))[:l.mkRead]
		ld.mkBuf = mk
		if err := memory.ReadFull(ld.kmem, mk, kp); err != nil {
			return src, fmt.Errorf("struct mod_kallsyms at %#x: %w", kp, err)
		}
		src.symtab, _ = ld.uint(mk, l.symtab)
		src.num, _ = ld.uint(mk, l.numSymtab)
		src.strtab, _ = ld.uint(mk, l.strtab)
		src.typetab, src.hasTypes = ld.uint(mk, l.typetab)
	}
	m.NumSymtab = src.num
	return src, nil
}

// symbols reads the module's symbol table from src and builds its index.
// A failure of the export table alone is recorded in m.Err and the
// symbols are kept.
func (ld *loader) symbols(m *Module, src *symSource) error {
	symtab, num, strtab, typetab, hasTypes := src.symtab, src.num, src.strtab, src.typetab, src.hasTypes
	if num > MaxSymbols {
		return corrupt("num_symtab %d exceeds the cap of %d", num, MaxSymbols)
	}
	es := elf64Sym
	if ld.ptr == 4 {
		es = elf32Sym
	}
	tab, err := ld.readTable(ld.tabBuf, symtab, num*es.size, 0)
	ld.tabBuf = tab
	if err != nil {
		return fmt.Errorf("symtab at %#x (%d symbols): %w", symtab, num, err)
	}
	var types []byte
	if hasTypes {
		types, err = ld.readTable(ld.typeBuf, typetab, num, 0)
		ld.typeBuf = types
		if err != nil {
			return fmt.Errorf("typetab at %#x: %w", typetab, err)
		}
	}
	u32 := func(p []byte) uint64 { return uint64(ld.bo.Uint32(p)) }
	word := ld.t.Pointer
	var maxName uint64
	for i := uint64(0); i < num; i++ {
		maxName = max(maxName, u32(tab[i*es.size+es.name:]))
	}
	if maxName >= MaxStrtab {
		return corrupt("st_name %d beyond the %d-byte string table cap", maxName, MaxStrtab)
	}
	var strs []byte
	if num > 0 {
		// Names end within KSYM_NAME_LEN of the last one's start, but the
		// memory after the table may be absent: take what is there.
		strs, err = ld.readPrefix(ld.strBuf, strtab, maxName+uint64(ld.nameLen), maxName+1)
		ld.strBuf = strs
		if err != nil {
			return fmt.Errorf("strtab at %#x: %w", strtab, err)
		}
	}
	ex, exErr := ld.exports(m, src.syms, src.numSyms)
	b := symfinder.NewBuilder("module:"+m.Name, m.Name)
	b.SetExtents(regionRanges(m.Regions), symfinder.SkippedInModuleLookups)
	b.Grow(int(num), len(strs))
	for i := uint64(0); i < num; i++ {
		s := tab[i*es.size:]
		off := u32(s[es.name:])
		win := strs[off:min(uint64(len(strs)), off+uint64(ld.nameLen))]
		name, ok := cstr(win)
		if !ok {
			if len(win) < ld.nameLen {
				return corrupt("name of symbol %d at strtab+%d has no NUL before unreadable memory", i, off)
			}
			name = win[:ld.nameLen-1] // strscpy truncates to KSYM_NAME_LEN-1
		}
		if len(name) == 0 {
			continue
		}
		value := word(s[es.value:])
		var kind byte
		switch {
		case hasTypes:
			kind = types[i]
		case ld.opt.TypeInSize:
			kind = byte(word(s[es.stsize:]))
		default:
			kind = s[es.info]
		}
		if ex.exported(name, value) {
			kind = toUpper(kind)
		} else {
			kind = toLower(kind)
		}
		if ld.opt.TypeInSize && !hasTypes {
			b.Add(value, kind, name)
		} else {
			b.AddSized(value, word(s[es.stsize:]), kind, name)
		}
	}
	ix, err := b.Build()
	if err != nil {
		return err
	}
	m.Symbols = ix
	if exErr != nil {
		m.Err = &ModuleError{Name: m.Name, Addr: m.Addr, Err: fmt.Errorf("export table (type letters all lower case): %w", exErr)}
	}
	return nil
}

// ksymLayout is a struct kernel_symbol layout: place-relative 32-bit
// offsets (CONFIG_HAVE_ARCH_PREL32_RELOCATIONS: x86_64, arm64, ... since
// v4.19) or absolute pointers; 12/8 bytes relative and 3/2 pointers
// absolute, with and without the namespace (v5.4+).
type ksymLayout struct {
	prel              bool
	stride            uint64
	valueOff, nameOff uint64
}

func (ld *loader) ksymCandidates() []ksymLayout {
	var out []ksymLayout
	if ld.ksym != nil {
		out = append(out, *ld.ksym)
	}
	if ks := ld.l.ksym; ks != nil && ks.Size > 0 {
		if v, ok := ks.Field("value_offset"); ok {
			if n, ok := ks.Field("name_offset"); ok {
				out = append(out, ksymLayout{prel: true, stride: ks.Size, valueOff: v.Offset, nameOff: n.Offset})
			}
		} else if v, ok := ks.Field("value"); ok {
			if n, ok := ks.Field("name"); ok {
				out = append(out, ksymLayout{stride: ks.Size, valueOff: v.Offset, nameOff: n.Offset})
			}
		}
	}
	p := ld.ptr
	return append(out,
		ksymLayout{prel: true, stride: 12, valueOff: 0, nameOff: 4},
		ksymLayout{prel: true, stride: 8, valueOff: 0, nameOff: 4},
		ksymLayout{stride: 3 * p, valueOff: 0, nameOff: p},
		ksymLayout{stride: 2 * p, valueOff: 0, nameOff: p},
	)
}

// exportTable is a module's EXPORT_SYMBOL table (mod->syms), in the
// kernel's order.
type exportTable struct {
	names  []string
	values []uint64
}

// exported is the kernel's is_exported: a binary search by name over
// mod->syms, done exactly as lib/bsearch.c does it (so that an unsorted
// table gives the kernel's answer too), then a value check.
func (ex *exportTable) exported(name []byte, value uint64) bool {
	if ex == nil {
		return false
	}
	base, num := 0, len(ex.names)
	for num > 0 {
		pivot := base + num>>1
		c := compareBS(name, ex.names[pivot])
		if c == 0 {
			return ex.values[pivot] == value
		}
		if c > 0 {
			base = pivot + 1
			num--
		}
		num >>= 1
	}
	return false
}

// exports reads mod->syms. The layout of struct kernel_symbol is rarely in
// BTF, so each candidate layout is tried and the first whose every name
// pointer leads to a printable string is kept (and tried first for the
// next module read).
func (ld *loader) exports(m *Module, syms, num uint64) (*exportTable, error) {
	if num == 0 || syms == 0 {
		return nil, nil
	}
	if num > MaxExports {
		return nil, corrupt("num_syms %d exceeds the cap of %d", num, MaxExports)
	}
	var firstErr error
	for _, c := range ld.ksymCandidates() {
		ex, err := ld.tryExports(m, syms, num, c)
		if err == nil {
			ld.ksym = &c
			return ex, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, fmt.Errorf("syms at %#x (%d entries): no struct kernel_symbol layout fits: %w", syms, num, firstErr)
}

func (ld *loader) tryExports(m *Module, syms, num uint64, c ksymLayout) (*exportTable, error) {
	raw, err := ld.readTable(ld.exRawBuf, syms, num*c.stride, 0)
	ld.exRawBuf = raw
	if err != nil {
		return nil, err
	}
	ex := &exportTable{names: make([]string, num), values: make([]uint64, num)}
	nameAddrs := make([]uint64, num)
	lo, hi := ^uint64(0), uint64(0)
	for i := uint64(0); i < num; i++ {
		e := i * c.stride
		if c.prel {
			at := syms + e
			ex.values[i] = at + c.valueOff + uint64(int64(int32(ld.bo.Uint32(raw[e+c.valueOff:]))))
			nameAddrs[i] = at + c.nameOff + uint64(int64(int32(ld.bo.Uint32(raw[e+c.nameOff:]))))
		} else {
			f := func(off uint64) uint64 { return ld.t.Pointer(raw[e+off:]) }
			ex.values[i], nameAddrs[i] = f(c.valueOff), f(c.nameOff)
		}
		a := nameAddrs[i]
		if len(m.Regions) > 0 && !inRegions(m.Regions, a) {
			return nil, corrupt("export %d: name pointer %#x outside the module", i, a)
		}
		lo, hi = min(lo, a), max(hi, a)
	}
	// Export names sit together in __ksymtab_strings: read them at once
	// when they span little, else one by one.
	const maxSpan = 1 << 20
	var span []byte
	if hi-lo < maxSpan {
		span, _ = ld.readPrefix(ld.exNameBuf, lo, hi-lo+uint64(ld.nameLen), 0)
		ld.exNameBuf = span
	}
	for i, a := range nameAddrs {
		var name []byte
		ok := false
		if a-lo < uint64(len(span)) {
			name, ok = cstr(span[a-lo : min(uint64(len(span)), a-lo+uint64(ld.nameLen))])
		}
		if !ok {
			s, err := memory.CString(ld.kmem, a, ld.nameLen)
			if err != nil {
				return nil, fmt.Errorf("export %d: name at %#x: %w", i, a, err)
			}
			name = []byte(s)
		}
		if !printable(name) {
			return nil, corrupt("export %d: name at %#x is not a printable string", i, a)
		}
		ex.names[i] = string(name)
	}
	return ex, nil
}

// compareBS is strings.Compare(string(b), s) without copying b (the
// conversion allocates for names over 32 bytes, once per symbol).
func compareBS(b []byte, s string) int {
	return strings.Compare(unsafe.String(unsafe.SliceData(b), len(b)), s)
}

// regionRanges are the ranges in which a module's symbols answer lookups
// by address: each region, and a module_layout's text apart from the rest
// of it, since the kernel's find_kallsyms_symbol bounds a text symbol by
// the end of text. A region that wraps around or overlaps one before it
// (only a corrupt module does that) is left out.
func regionRanges(regions []Region) []symfinder.Range {
	var rs []symfinder.Range
	add := func(start, size uint64) {
		if size == 0 || start+size < start {
			return
		}
		rs = append(rs, symfinder.Range{Start: start, End: start + size})
	}
	for _, r := range regions {
		if r.TextSize > 0 && r.TextSize < r.Size {
			add(r.Base, r.TextSize)
			add(r.Base+r.TextSize, r.Size-r.TextSize)
		} else {
			add(r.Base, r.Size)
		}
	}
	slices.SortFunc(rs, func(a, b symfinder.Range) int { return cmp.Compare(a.Start, b.Start) })
	out := rs[:0]
	for _, r := range rs {
		if len(out) > 0 && r.Start < out[len(out)-1].End {
			continue
		}
		out = append(out, r)
	}
	return out
}

func inRegions(rs []Region, a uint64) bool {
	for _, r := range rs {
		if r.Size > 0 && a-r.Base < r.Size {
			return true
		}
	}
	return false
}
