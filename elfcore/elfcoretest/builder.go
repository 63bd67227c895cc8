// Package elfcoretest builds synthetic ELF core files for tests: ELF32 or
// ELF64, either byte order, any number of PT_LOAD segments (with PN_XNUM when
// there are 65535 or more), notes, and the layout quirks real producers have
// (QEMU ≥ 7.2 puts section headers before the program headers and writes
// e_ehsize = 8). It imports nothing of this module, so any package's tests
// can use it.
package elfcoretest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// Note is one ELF note to write.
type Note struct {
	Name string
	Type uint32
	Desc []byte
}

// Segment is one PT_LOAD to write. Data is the file image (p_filesz =
// len(Data)); Memsz is p_memsz, and is raised to len(Data) when smaller.
type Segment struct {
	Paddr, Vaddr uint64
	Memsz        uint64
	Data         []byte
}

// Builder describes a core file. The zero value is an empty little-endian
// ELF64 x86-64 core.
type Builder struct {
	Class     elf.Class        // ELFCLASS64 when zero
	ByteOrder binary.ByteOrder // little-endian when nil
	Machine   elf.Machine      // EM_X86_64 when zero
	Flags     uint32           // e_flags
	Notes     []Note
	NoteAlign int // 4 when zero
	Segments  []Segment

	// ForceXNUM writes e_phnum = PN_XNUM and the count in section 0 even
	// when there are fewer than 65535 program headers.
	ForceXNUM bool
	// QEMULayout places the section header table right after the ELF
	// header, before the program headers, and writes e_ehsize = 8, as QEMU
	// 7.2 and later do.
	QEMULayout bool
}

// PRStatusX86_64 returns an x86-64 NT_PRSTATUS descriptor (336 bytes) with
// pr_pid, RIP and RSP set.
func PRStatusX86_64(bo binary.ByteOrder, pid int32, rip, rsp uint64) []byte {
	d := make([]byte, 336)
	bo.PutUint32(d[32:], uint32(pid))
	bo.PutUint64(d[112+16*8:], rip)
	bo.PutUint64(d[112+19*8:], rsp)
	return d
}

// PRStatusARM64 returns an arm64 NT_PRSTATUS descriptor (392 bytes).
func PRStatusARM64(bo binary.ByteOrder, pid int32, pc, sp uint64) []byte {
	d := make([]byte, 392)
	bo.PutUint32(d[32:], uint32(pid))
	bo.PutUint64(d[112+31*8:], sp)
	bo.PutUint64(d[112+32*8:], pc)
	return d
}

// PRStatusI386 returns an i386 NT_PRSTATUS descriptor (144 bytes).
func PRStatusI386(bo binary.ByteOrder, pid int32, eip, esp uint32) []byte {
	d := make([]byte, 144)
	bo.PutUint32(d[24:], uint32(pid))
	bo.PutUint32(d[72+12*4:], eip)
	bo.PutUint32(d[72+15*4:], esp)
	return d
}

// VMCOREINFONote returns the note the kernel writes for text.
func VMCOREINFONote(text string) Note {
	return Note{Name: "VMCOREINFO", Type: 0, Desc: []byte(text)}
}

// NoteBytes encodes notes with the given alignment (4 or 8).
func NoteBytes(bo binary.ByteOrder, align int, notes []Note) []byte {
	if align == 0 {
		align = 4
	}
	var b bytes.Buffer
	var h [12]byte
	for _, n := range notes {
		name := n.Name
		namesz := 0
		if name != "" {
			namesz = len(name) + 1
		}
		bo.PutUint32(h[0:], uint32(namesz))
		bo.PutUint32(h[4:], uint32(len(n.Desc)))
		bo.PutUint32(h[8:], n.Type)
		b.Write(h[:])
		if namesz > 0 {
			b.WriteString(name)
			b.WriteByte(0)
		}
		pad(&b, align)
		b.Write(n.Desc)
		pad(&b, align)
	}
	return b.Bytes()
}

func pad(b *bytes.Buffer, align int) {
	for b.Len()%align != 0 {
		b.WriteByte(0)
	}
}

// Bytes returns the core file.
func (bld *Builder) Bytes() []byte {
	class := bld.Class
	if class == elf.ELFCLASSNONE {
		class = elf.ELFCLASS64
	}
	bo := bld.ByteOrder
	if bo == nil {
		bo = binary.LittleEndian
	}
	machine := bld.Machine
	if machine == 0 {
		machine = elf.EM_X86_64
	}
	is64 := class == elf.ELFCLASS64
	ehsize, phentsize, shentsize := 52, 32, 40
	if is64 {
		ehsize, phentsize, shentsize = 64, 56, 64
	}
	notes := NoteBytes(bo, bld.NoteAlign, bld.Notes)
	nph := len(bld.Segments)
	if len(bld.Notes) > 0 {
		nph++
	}
	xnum := bld.ForceXNUM || nph >= 0xffff
	shnum := 0
	if xnum {
		shnum = 1
	}
	var phoff, shoff int
	if bld.QEMULayout {
		shoff = ehsize
		shnum = 2
		phoff = shoff + shnum*shentsize
	} else {
		phoff = ehsize
		shoff = phoff + nph*phentsize
	}
	if shnum == 0 {
		shoff = 0
	}
	off := phoff + nph*phentsize
	if !bld.QEMULayout && shnum > 0 {
		off = shoff + shnum*shentsize
	}
	noteOff := off
	dataOff := noteOff + len(notes)

	out := make([]byte, dataOff)
	// ELF header.
	copy(out, elf.ELFMAG)
	out[elf.EI_CLASS] = byte(class)
	if bo == binary.ByteOrder(binary.BigEndian) {
		out[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	} else {
		out[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	}
	out[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	bo.PutUint16(out[16:], uint16(elf.ET_CORE))
	bo.PutUint16(out[18:], uint16(machine))
	bo.PutUint32(out[20:], uint32(elf.EV_CURRENT))
	phnum := nph
	if xnum {
		phnum = 0xffff
	}
	es := ehsize
	if bld.QEMULayout {
		es = 8
	}
	if is64 {
		bo.PutUint64(out[32:], uint64(phoff))
		bo.PutUint64(out[40:], uint64(shoff))
		bo.PutUint32(out[48:], bld.Flags)
		bo.PutUint16(out[52:], uint16(es))
		bo.PutUint16(out[54:], uint16(phentsize))
		bo.PutUint16(out[56:], uint16(phnum))
		bo.PutUint16(out[58:], uint16(shentsize))
		bo.PutUint16(out[60:], uint16(shnum))
	} else {
		bo.PutUint32(out[28:], uint32(phoff))
		bo.PutUint32(out[32:], uint32(shoff))
		bo.PutUint32(out[36:], bld.Flags)
		bo.PutUint16(out[40:], uint16(es))
		bo.PutUint16(out[42:], uint16(phentsize))
		bo.PutUint16(out[44:], uint16(phnum))
		bo.PutUint16(out[46:], uint16(shentsize))
		bo.PutUint16(out[48:], uint16(shnum))
	}
	// Section 0 carries the real program header count under PN_XNUM.
	if shnum > 0 && xnum {
		info := 28
		if is64 {
			info = 44
		}
		bo.PutUint32(out[shoff+info:], uint32(nph))
	}
	// Program headers.
	ph := func(i int, typ elf.ProgType, off, vaddr, paddr, filesz, memsz, align uint64) {
		p := out[phoff+i*phentsize:]
		if is64 {
			bo.PutUint32(p[0:], uint32(typ))
			bo.PutUint64(p[8:], off)
			bo.PutUint64(p[16:], vaddr)
			bo.PutUint64(p[24:], paddr)
			bo.PutUint64(p[32:], filesz)
			bo.PutUint64(p[40:], memsz)
			bo.PutUint64(p[48:], align)
		} else {
			bo.PutUint32(p[0:], uint32(typ))
			bo.PutUint32(p[4:], uint32(off))
			bo.PutUint32(p[8:], uint32(vaddr))
			bo.PutUint32(p[12:], uint32(paddr))
			bo.PutUint32(p[16:], uint32(filesz))
			bo.PutUint32(p[20:], uint32(memsz))
			bo.PutUint32(p[28:], uint32(align))
		}
	}
	i := 0
	if len(bld.Notes) > 0 {
		ph(0, elf.PT_NOTE, uint64(noteOff), 0, 0, uint64(len(notes)), uint64(len(notes)), uint64(bld.NoteAlign))
		i++
	}
	copy(out[noteOff:], notes)
	data := uint64(dataOff)
	for _, s := range bld.Segments {
		memsz := max(s.Memsz, uint64(len(s.Data)))
		ph(i, elf.PT_LOAD, data, s.Vaddr, s.Paddr, uint64(len(s.Data)), memsz, 0)
		i++
		data += uint64(len(s.Data))
	}
	for _, s := range bld.Segments {
		out = append(out, s.Data...)
	}
	return out
}
