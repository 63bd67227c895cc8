package export

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Target is the ELF flavour of the files: the kernel's machine, whose
// byte order and pointer size (which makes the class, see Class) are
// required, and its e_machine.
type Target struct {
	memory.Target
	Machine elf.Machine
}

// Class is the ELF class of t's pointer size: ELFCLASS64 for 8 bytes,
// ELFCLASS32 for 4, ELFCLASSNONE for any other.
func (t Target) Class() elf.Class {
	switch t.PtrSize {
	case 8:
		return elf.ELFCLASS64
	case 4:
		return elf.ELFCLASS32
	}
	return elf.ELFCLASSNONE
}

// Section is one section of a symbol file: Size bytes at Base, code when
// Exec, else data, writable unless ReadOnly. It holds no data
// (SHT_NOBITS).
type Section struct {
	Name     string
	Base     uint64
	Size     uint64
	Exec     bool
	ReadOnly bool
}

// maxSectionSize is the largest section size readers take (debug/elf
// reads it as an int64).
const maxSectionSize = 1<<63 - 1

// maxSections keeps section indices below SHN_LORESERVE, so no extended
// numbering is needed.
const maxSections = int(elf.SHN_LORESERVE) - 8

// ErrTooMany means the symbols need more sections than an ELF file holds
// without extended section numbering.
var ErrTooMany = errors.New("export: too many sections")

// ErrDoesNotFit means a symbol's or section's address or size, or the
// file's own size, is above 2^32-1 for a 32-bit Target. Its message
// completes the one of the error wrapping it, which names the symbol or
// section.
var ErrDoesNotFit = errors.New("does not fit a 32-bit ELF file")

// OverlapError reports two of the sections given to WriteELF that
// overlap: Next starts inside Section.
type OverlapError struct {
	Section, Next Section
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("export: section %s [%#x, +%#x) overlaps %s at %#x", e.Section.Name, e.Section.Base, e.Section.Size, e.Next.Name, e.Next.Base)
}

// WriteELF writes an ELF symbol file of syms to w. With sections nil the
// sections are derived from the symbols (DeriveSections); else they must
// not overlap (an *OverlapError). A 32-bit Target refuses addresses or
// sizes above 2^32-1 (an error wrapping ErrDoesNotFit); one without its
// byte order or pointer size is an error wrapping memory.ErrUnknownTarget,
// one with a pointer size no kernel has errors.ErrUnsupported.
func WriteELF(w io.Writer, t Target, syms []symfinder.Symbol, sections []Section) error {
	if sections == nil {
		sections = DeriveSections(syms)
	}
	data := dataRanges(syms)
	if len(sections) > maxSections {
		return fmt.Errorf("%w: %d", ErrTooMany, len(sections))
	}
	if err := t.Target.Check(); err != nil {
		return fmt.Errorf("export: ELF: %w", err)
	}
	is64 := t.PtrSize == 8
	secs := slices.Clone(sections)
	slices.SortStableFunc(secs, func(a, b Section) int { return cmp.Compare(a.Base, b.Base) })
	for i := 1; i < len(secs); i++ {
		if p := secs[i-1]; p.Size > 0 && secs[i].Base-p.Base < p.Size {
			return &OverlapError{Section: p, Next: secs[i]}
		}
	}
	fits := func(v uint64) bool { return is64 || v <= 0xffffffff }

	// String tables.
	strtab := []byte{0}
	addStr := func(tab *[]byte, s string) uint32 {
		off := uint32(len(*tab))
		*tab = append(append(*tab, s...), 0)
		return off
	}
	shstrtab := []byte{0}

	// Symbols: locals first, as ELF requires, each group in input order.
	type esym struct {
		name        uint32
		info, other byte
		shndx       uint16
		value, size uint64
	}
	var locals, globals []esym
	for _, s := range syms {
		size := s.ELFSize
		if size == 0 {
			size = s.Size
		}
		if !fits(s.Addr) || !fits(size) {
			return fmt.Errorf("export: symbol %s at %#x size %#x %w", s.Name, s.Addr, size, ErrDoesNotFit)
		}
		k := byte(s.Kind)
		shndx := uint16(elf.SHN_ABS)
		exec := false
		if k != 'a' && k != 'A' {
			if i := sectionOf(secs, s.Addr); i >= 0 {
				shndx = uint16(i + 1)
				exec = secs[i].Exec
			}
		}
		e := esym{name: addStr(&strtab, s.Name), shndx: shndx, value: s.Addr, size: size}
		bind, typ := bindType(k, isCode(s, data), exec)
		e.info = byte(bind)<<4 | byte(typ)
		if bind == elf.STB_LOCAL {
			locals = append(locals, e)
		} else {
			globals = append(globals, e)
		}
	}

	ptr := 8
	ehsize, shentsize, symentsize := 64, 64, 24
	if !is64 {
		ptr, ehsize, shentsize, symentsize = 4, 52, 40, 16
	}
	bo := t.ByteOrder
	var symtab bytes.Buffer
	symtab.Write(make([]byte, symentsize)) // index 0
	for _, e := range slices.Concat(locals, globals) {
		var b [24]byte
		if is64 {
			bo.PutUint32(b[0:], e.name)
			b[4], b[5] = e.info, e.other
			bo.PutUint16(b[6:], e.shndx)
			bo.PutUint64(b[8:], e.value)
			bo.PutUint64(b[16:], e.size)
		} else {
			bo.PutUint32(b[0:], e.name)
			bo.PutUint32(b[4:], uint32(e.value))
			bo.PutUint32(b[8:], uint32(e.size))
			b[12], b[13] = e.info, e.other
			bo.PutUint16(b[14:], e.shndx)
		}
		symtab.Write(b[:symentsize])
	}

	// Section headers: NULL, the NOBITS sections, .symtab, .strtab, .shstrtab.
	type shdr struct {
		name, typ              uint32
		flags, addr, off, size uint64
		link, info             uint32
		align, entsize         uint64
	}
	hdrs := []shdr{{}}
	for _, s := range secs {
		if s.Size > maxSectionSize {
			return fmt.Errorf("export: section %s at %#x: size %#x", s.Name, s.Base, s.Size)
		}
		if !fits(s.Base) || !fits(s.Size) {
			return fmt.Errorf("export: section %s at %#x %w", s.Name, s.Base, ErrDoesNotFit)
		}
		flags := uint64(elf.SHF_ALLOC | elf.SHF_WRITE)
		switch {
		case s.Exec:
			flags = uint64(elf.SHF_ALLOC | elf.SHF_EXECINSTR)
		case s.ReadOnly:
			flags = uint64(elf.SHF_ALLOC)
		}
		hdrs = append(hdrs, shdr{name: addStr(&shstrtab, s.Name), typ: uint32(elf.SHT_NOBITS), flags: flags, addr: s.Base, off: uint64(ehsize), size: s.Size, align: 1})
	}
	symIdx := len(hdrs)
	off := uint64(ehsize)
	hdrs = append(hdrs, shdr{name: addStr(&shstrtab, ".symtab"), typ: uint32(elf.SHT_SYMTAB), off: off, size: uint64(symtab.Len()),
		link: uint32(symIdx + 1), info: uint32(1 + len(locals)), align: uint64(ptr), entsize: uint64(symentsize)})
	off += uint64(symtab.Len())
	hdrs = append(hdrs, shdr{name: addStr(&shstrtab, ".strtab"), typ: uint32(elf.SHT_STRTAB), off: off, size: uint64(len(strtab)), align: 1})
	off += uint64(len(strtab))
	shstrName := addStr(&shstrtab, ".shstrtab")
	hdrs = append(hdrs, shdr{name: shstrName, typ: uint32(elf.SHT_STRTAB), off: off, size: uint64(len(shstrtab)), align: 1})
	off += uint64(len(shstrtab))
	shoff := (off + uint64(ptr) - 1) &^ uint64(ptr-1)
	if !fits(shoff + uint64(len(hdrs)*shentsize)) {
		return fmt.Errorf("export: the file of %d symbols %w", len(syms), ErrDoesNotFit)
	}

	// ELF header.
	eh := make([]byte, ehsize)
	copy(eh, elf.ELFMAG)
	eh[elf.EI_CLASS] = byte(t.Class())
	eh[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	if bo == binary.ByteOrder(binary.BigEndian) {
		eh[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	eh[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	bo.PutUint16(eh[16:], uint16(elf.ET_EXEC))
	bo.PutUint16(eh[18:], uint16(t.Machine))
	bo.PutUint32(eh[20:], uint32(elf.EV_CURRENT))
	if is64 {
		bo.PutUint64(eh[40:], shoff)
		bo.PutUint16(eh[52:], uint16(ehsize))
		bo.PutUint16(eh[58:], uint16(shentsize))
		bo.PutUint16(eh[60:], uint16(len(hdrs)))
		bo.PutUint16(eh[62:], uint16(len(hdrs)-1))
	} else {
		bo.PutUint32(eh[32:], uint32(shoff))
		bo.PutUint16(eh[40:], uint16(ehsize))
		bo.PutUint16(eh[46:], uint16(shentsize))
		bo.PutUint16(eh[48:], uint16(len(hdrs)))
		bo.PutUint16(eh[50:], uint16(len(hdrs)-1))
	}
	var out bytes.Buffer
	out.Write(eh)
	out.Write(symtab.Bytes())
	out.Write(strtab)
	out.Write(shstrtab)
	out.Write(make([]byte, shoff-off))
	for _, h := range hdrs {
		var b [64]byte
		if is64 {
			bo.PutUint32(b[0:], h.name)
			bo.PutUint32(b[4:], h.typ)
			bo.PutUint64(b[8:], h.flags)
			bo.PutUint64(b[16:], h.addr)
			bo.PutUint64(b[24:], h.off)
			bo.PutUint64(b[32:], h.size)
			bo.PutUint32(b[40:], h.link)
			bo.PutUint32(b[44:], h.info)
			bo.PutUint64(b[48:], h.align)
			bo.PutUint64(b[56:], h.entsize)
		} else {
			bo.PutUint32(b[0:], h.name)
			bo.PutUint32(b[4:], h.typ)
			bo.PutUint32(b[8:], uint32(h.flags))
			bo.PutUint32(b[12:], uint32(h.addr))
			bo.PutUint32(b[16:], uint32(h.off))
			bo.PutUint32(b[20:], uint32(h.size))
			bo.PutUint32(b[24:], h.link)
			bo.PutUint32(b[28:], h.info)
			bo.PutUint32(b[32:], uint32(h.align))
			bo.PutUint32(b[36:], uint32(h.entsize))
		}
		out.Write(b[:shentsize])
	}
	_, err := w.Write(out.Bytes())
	return err
}

// sectionOf returns the index of the section of sorted secs holding addr,
// or -1.
func sectionOf(secs []Section, addr uint64) int {
	i, found := slices.BinarySearchFunc(secs, addr, func(s Section, a uint64) int { return cmp.Compare(s.Base, a) })
	if !found {
		i--
	}
	// Skip back over empty sections at the same base.
	for ; i >= 0; i-- {
		if s := secs[i]; addr-s.Base < s.Size {
			return i
		}
		if secs[i].Base < addr && secs[i].Size > 0 {
			break
		}
	}
	return -1
}

// bindType maps a kallsyms type letter to an ELF binding and type: upper
// case global, lower case local, W and V weak; code (see isCode; and weak
// symbols in code) functions, a and A no type, the rest objects.
func bindType(k byte, code, exec bool) (elf.SymBind, elf.SymType) {
	bind := elf.STB_LOCAL
	switch {
	case k == 'W' || k == 'V':
		bind = elf.STB_WEAK
	case k >= 'A' && k <= 'Z':
		bind = elf.STB_GLOBAL
	}
	switch k {
	case 't', 'T':
		if code {
			return bind, elf.STT_FUNC
		}
		return bind, elf.STT_OBJECT
	case 'w', 'W':
		if exec {
			return bind, elf.STT_FUNC
		}
		return bind, elf.STT_OBJECT
	case 'a', 'A':
		return bind, elf.STT_NOTYPE
	}
	return bind, elf.STT_OBJECT
}

// maxExtent caps how far one symbol stretches a derived section: no
// kernel symbol is 4 GiB long, and a section size must stay below 2^63
// for readers (debug/elf takes it as an int64).
const maxExtent = 1 << 32

// isText reports whether a type letter is a code symbol's.
func isText(k byte) bool { return k == 't' || k == 'T' }

// dataRanges returns the core kernel's read-only and initialized data,
// [__start_rodata, __end_rodata] and [_sdata, _edata] (ends included: the
// end markers are data's), those whose two symbols syms has.
func dataRanges(syms []symfinder.Symbol) [][2]uint64 {
	want := map[string]uint64{"__start_rodata": 0, "__end_rodata": 0, "_sdata": 0, "_edata": 0}
	have := map[string]bool{}
	for _, s := range syms {
		if _, ok := want[s.Name]; ok && s.Module == "" && !have[s.Name] {
			want[s.Name], have[s.Name] = s.Addr, true
		}
	}
	var out [][2]uint64
	for _, r := range [][2]string{{"__start_rodata", "__end_rodata"}, {"_sdata", "_edata"}} {
		if have[r[0]] && have[r[1]] && want[r[0]] <= want[r[1]] {
			out = append(out, [2]uint64{want[r[0]], want[r[1]]})
		}
	}
	return out
}

// isCode reports whether s is code: a text letter, outside the core
// kernel's data (dataRanges). Linux 7.x prints many .data symbols with
// text letters (Debian 7.2.13: jiffies, init_task, _sdata and _edata; its
// .data is an executable section to nm, for the kexec code it copies
// elsewhere before running it), and rodata's end markers too.
func isCode(s symfinder.Symbol, data [][2]uint64) bool {
	if !isText(byte(s.Kind)) {
		return false
	}
	for _, r := range data {
		if s.Module == "" && s.Addr >= r[0] && s.Addr <= r[1] {
			return false
		}
	}
	return true
}

// DeriveSections groups syms (in any order) into sections by address: a
// section per run of code (t, T, see isCode) or non-code symbols, in address order,
// each from its first symbol up to the next run's first symbol (the last
// up to its furthest symbol end). Weak symbols (w, W, v, V) join the run
// they fall in; absolute ones (a, A) are in no section. The names are
// .text, .data, then .text.1, .data.1, ... in address order.
func DeriveSections(syms []symfinder.Symbol) []Section {
	data := dataRanges(syms)
	type pt struct {
		addr, end uint64
		text      bool
		weak      bool
	}
	var pts []pt
	for _, s := range syms {
		k := byte(s.Kind)
		if k == 'a' || k == 'A' {
			continue
		}
		// At least one byte, so that a section ending with the symbol
		// holds it (_end has size 0).
		size := min(max(s.Size, s.ELFSize, 1), maxExtent)
		end := s.Addr + size
		if end < s.Addr {
			end = ^uint64(0)
		}
		pts = append(pts, pt{s.Addr, end, isCode(s, data), k == 'w' || k == 'W' || k == 'v' || k == 'V'})
	}
	slices.SortStableFunc(pts, func(a, b pt) int { return cmp.Compare(a.addr, b.addr) })
	type run struct {
		start, end uint64
		text       bool
	}
	var runs []run
	var last uint64 // the previous point's address
	for _, p := range pts {
		if len(runs) > 0 {
			r := &runs[len(runs)-1]
			if p.weak || p.text == r.text || p.addr == last {
				// Same kind, weak, or at the previous symbol's address:
				// a section must hold every symbol at its start.
				r.end = max(r.end, p.end)
				last = p.addr
				continue
			}
		}
		if p.weak && len(runs) == 0 {
			p.text = false
		}
		runs = append(runs, run{p.addr, p.end, p.text})
		last = p.addr
	}
	var out []Section
	count := map[bool]int{}
	for i, r := range runs {
		end := r.end
		if i+1 < len(runs) {
			end = runs[i+1].start
		}
		size := end - r.start
		name := ".data"
		if r.text {
			name = ".text"
		}
		if n := count[r.text]; n > 0 {
			name = fmt.Sprintf("%s.%d", name, n)
		}
		count[r.text]++
		out = append(out, Section{Name: name, Base: r.start, Size: size, Exec: r.text})
	}
	return out
}
