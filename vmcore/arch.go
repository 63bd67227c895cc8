package vmcore

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Arch is a kernel architecture and the machine description decoders
// read its memory by.
type Arch struct {
	// Name is the kernel's name: "x86_64", "i386", "arm64", "arm",
	// "s390x", "ppc64le", "ppc64", "riscv64", ...; "" when unknown.
	Name string
	// Target is the byte order, pointer size and page size, each zero
	// when unknown. Dump.Arch's PageSize is the kernel's page size (see
	// Dump.PageSize); the architecture alone gives none.
	memory.Target
	// Source says where Name came from: "elf", "kdump-header",
	// "vmcoreinfo" or "notes" (the size of NT_PRSTATUS: 32-bit ARM);
	// "elf+note-order" or "kdump-header+note-order" when the byte order
	// (ppc64le or ppc64) is that of the VMCOREINFO note the kernel left in
	// memory, not the container's.
	Source string
}

// archInfo is what we know of each architecture by name.
var archInfo = map[string]struct {
	bo      binary.ByteOrder
	ptr     int
	machine elf.Machine
	page    int // the only page size, or 0 if configurable
}{
	"x86_64":  {binary.LittleEndian, 8, elf.EM_X86_64, 4096},
	"i386":    {binary.LittleEndian, 4, elf.EM_386, 4096},
	"arm64":   {binary.LittleEndian, 8, elf.EM_AARCH64, 0},
	"arm":     {binary.LittleEndian, 4, elf.EM_ARM, 4096},
	"s390x":   {binary.BigEndian, 8, elf.EM_S390, 4096},
	"ppc64le": {binary.LittleEndian, 8, elf.EM_PPC64, 0},
	"ppc64":   {binary.BigEndian, 8, elf.EM_PPC64, 0},
	"riscv64": {binary.LittleEndian, 8, elf.EM_RISCV, 0},
}

// KernelStart returns the lowest address of the kernel's half of the
// address space, where text, data and stacks lie and below which an
// address is user space (or, on s390x, where the kernel runs in its own
// address space from 0): 1<<63 on 64-bit kernels, 0x80000000 on 32-bit
// ones (whose split is at least 2G/2G), 0 on s390x.
func (a Arch) KernelStart() uint64 {
	switch {
	case a.Name == "s390x" || a.Name == "s390":
		return 0
	case a.PtrSize == 4:
		return 0x80000000
	}
	return 1 << 63
}

// AddrDigits returns how many hex digits a kernel address has in the
// kernel's own text (%px, register dumps): two per pointer byte; 16 when
// the pointer size is unknown.
func (a Arch) AddrDigits() int {
	if a.PtrSize == 4 {
		return 8
	}
	return 16
}

// ReturnAddressFrames reports whether the kernel prints its call-trace
// frames as return addresses (%pB, looked up at addr-1: x86) rather than
// as the addresses they are (%pS: arm64, s390x, ...).
func (a Arch) ReturnAddressFrames() bool { return a.Name == "x86_64" || a.Name == "i386" }

// archFromELF names the architecture of e_machine in a file of byte order
// bo and class c. The class is only the container's: QEMU writes i386
// guests as ELF64, so EM_386 always means 4-byte pointers.
func archFromELF(m elf.Machine, bo binary.ByteOrder, c elf.Class) Arch {
	a := Arch{Target: memory.Target{ByteOrder: bo}, Source: "elf"}
	switch m {
	case elf.EM_X86_64:
		a.Name = "x86_64"
	case elf.EM_386:
		a.Name = "i386"
	case elf.EM_AARCH64:
		a.Name = "arm64"
	case elf.EM_ARM:
		a.Name = "arm"
	case elf.EM_S390:
		a.Name = "s390x"
		if c == elf.ELFCLASS32 {
			a.Name, a.PtrSize = "s390", 4
		}
	case elf.EM_PPC64:
		a.Name = "ppc64"
		if bo == binary.ByteOrder(binary.LittleEndian) {
			a.Name = "ppc64le"
		}
	case elf.EM_RISCV:
		a.Name = "riscv64"
		if c == elf.ELFCLASS32 {
			a.Name, a.PtrSize = "riscv32", 4
		}
	default:
		a.Name = strings.ToLower(strings.TrimPrefix(m.String(), "EM_"))
		a.PtrSize = 8
		if c == elf.ELFCLASS32 {
			a.PtrSize = 4
		}
		return a
	}
	if a.PtrSize == 0 {
		a.PtrSize = archInfo[a.Name].ptr
	}
	return a
}

// archFromUname names the architecture of a utsname machine string as the
// kdump header records it (uname -m of the crashed kernel, or QEMU's
// target name, which is upper case on some targets: QEMU's s390x writes
// "S390X"). Case is ignored.
func archFromUname(m string) Arch {
	m = strings.ToLower(strings.TrimRight(m, "\x00 "))
	var name string
	switch m {
	case "", "unknown":
		// QEMU 10 writes "Unknown" when it has no guest utsname: the
		// header says nothing, VMCOREINFO or the notes must decide.
		return Arch{}
	case "x86_64", "amd64":
		name = "x86_64"
	case "i386", "i486", "i586", "i686", "x86":
		name = "i386"
	case "aarch64", "arm64":
		name = "arm64"
	case "s390x":
		name = "s390x"
	case "ppc64le":
		name = "ppc64le"
	case "ppc64":
		name = "ppc64"
	case "riscv64":
		name = "riscv64"
	default:
		if strings.HasPrefix(m, "arm") {
			name = "arm"
		} else {
			return Arch{Name: m, Source: "kdump-header"}
		}
	}
	ai := archInfo[name]
	return Arch{Name: name, Target: memory.Target{ByteOrder: ai.bo, PtrSize: ai.ptr}, Source: "kdump-header"}
}

// resolveArch merges the container's architecture with VMCOREINFO's. What
// the container records (the ELF e_machine, the kdump header's utsname
// machine) identifies the architecture; VMCOREINFO only hints at it
// (vmcoreinfo.Info.Arch guesses from lines several architectures share:
// riscv64 prints NUMBER(VA_BITS) as arm64 does), so it decides only when
// the container does not say, and a hint that disagrees with the
// container is no evidence of corruption: the container wins. memOrder is
// the byte order of the VMCOREINFO note found in memory (nil when the
// container carried it): the kernel wrote it, so for the 64-bit PowerPC
// family, whose ELF e_machine and kdump header do not reliably give the
// kernel's byte order (QEMU 7.2 writes ppc64le dumps big-endian,
// docs/formats.md §3.8), it decides ppc64le against ppc64.
func resolveArch(c Arch, info *vmcoreinfo.Info, memOrder binary.ByteOrder) (Arch, error) {
	var vi string
	if info != nil {
		vi = info.Arch()
	}
	if isPPC64(c.Name) || (c.Name == "" && vi == "ppc64") {
		return resolvePPC64(c, vi, memOrder)
	}
	switch {
	case c.Name == "" && vi == "":
		return c, nil
	case c.Name == "":
		ai := archInfo[vi]
		return Arch{Name: vi, Target: memory.Target{ByteOrder: ai.bo, PtrSize: ai.ptr}, Source: "vmcoreinfo"}, nil
	case c.Source == "option" && vi != "" && vi != c.Name:
		// A name the caller gave for an image that records none is
		// checked: the image itself is what may be wrong for it.
		return Arch{}, fmt.Errorf("architecture mismatch: Options.Arch says %s, VMCOREINFO says %s: %w", c.Name, vi, memory.ErrCorrupt)
	}
	if ai, ok := archInfo[c.Name]; ok {
		// The container's byte order stays where it has one (aarch64_be,
		// armeb).
		c.Target = c.Target.Or(memory.Target{ByteOrder: ai.bo, PtrSize: ai.ptr})
	}
	return c, nil
}

// archByName is the architecture of a kernel name given by the caller
// (Options.Arch), its byte order and pointer size filled in when the name
// is known; the uname spellings (amd64, aarch64, i686, ...) are accepted.
func archByName(name string) Arch {
	a := archFromUname(name)
	if a.Name == "" {
		a.Name = name
	}
	a.Source = "option"
	return a
}

func isPPC64(name string) bool { return name == "ppc64" || name == "ppc64le" }

// resolvePPC64 is resolveArch for a container or VMCOREINFO naming the
// 64-bit PowerPC family: the byte order is the in-memory note's, else the
// container's.
func resolvePPC64(c Arch, vi string, memOrder binary.ByteOrder) (Arch, error) {
	if vi != "" && vi != "ppc64" {
		return Arch{}, fmt.Errorf("architecture mismatch: container says %s (%s), VMCOREINFO says %s: %w", c.Name, c.Source, vi, memory.ErrCorrupt)
	}
	a := Arch{Name: c.Name, Target: memory.Target{ByteOrder: c.ByteOrder, PtrSize: 8}, Source: c.Source}
	if c.Name == "" {
		a.Source = "vmcoreinfo"
	}
	if memOrder != nil && memOrder != a.ByteOrder {
		a.ByteOrder = memOrder
		if c.Name != "" {
			a.Source = c.Source + "+note-order"
		}
	}
	switch a.ByteOrder {
	case binary.ByteOrder(binary.LittleEndian):
		a.Name = "ppc64le"
	case binary.ByteOrder(binary.BigEndian):
		a.Name = "ppc64"
	default:
		// VMCOREINFO from a container that records no byte order:
		// ppc64 without knowing which.
		return Arch{}, nil
	}
	return a, nil
}

// armPRStatusSize is the size of 32-bit ARM's struct elf_prstatus: 72
// bytes before pr_reg, 18 registers, pr_fpvalid. No other architecture's
// is 148 bytes (i386's is 144).
const armPRStatusSize = 148

// archFromNotes names the architecture by the size of its NT_PRSTATUS
// notes when neither the container nor VMCOREINFO does: QEMU's kdump
// header says "Unknown" for 32-bit ARM, and a kernel without LPAE writes
// no ARM-only VMCOREINFO line. Only ARM is recognised this way.
func archFromNotes(notes []elfcore.Note) Arch {
	for _, n := range notes {
		if n.Name == "CORE" && n.Type == 1 && len(n.Desc) == armPRStatusSize {
			ai := archInfo["arm"]
			return Arch{Name: "arm", Target: memory.Target{ByteOrder: ai.bo, PtrSize: ai.ptr}, Source: "notes"}
		}
	}
	return Arch{}
}

func (a Arch) elfMachine() elf.Machine { return archInfo[a.Name].machine }

// ELFMachine returns the ELF e_machine of the architecture, for writers of
// ELF cores; elf.EM_NONE when the name is unknown. It inverts every name
// Arch can hold: the table's, s390 and riscv32, and the lower-cased
// "EM_" names given to other machines.
func (a Arch) ELFMachine() elf.Machine {
	if ai, ok := archInfo[a.Name]; ok {
		return ai.machine
	}
	switch a.Name {
	case "s390":
		return elf.EM_S390
	case "riscv32":
		return elf.EM_RISCV
	case "":
		return elf.EM_NONE
	}
	for m := elf.Machine(1); m < 1024; m++ {
		if s := m.String(); strings.HasPrefix(s, "EM_") && strings.ToLower(s[3:]) == a.Name {
			return m
		}
	}
	return elf.EM_NONE
}

func defaultPageSize(name string) int { return archInfo[name].page }
