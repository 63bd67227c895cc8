package vtop

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Config describes the dump a Translator reads.
type Config struct {
	// Arch is the architecture: "x86_64", "arm64", "arm", "i386",
	// "s390x", "ppc64le", "ppc64" or "riscv64" (aliases "amd64", "aarch64",
	// "armhf"/"armv7l", "386"/"i686", "s390", "ppc64el", "powerpc64" are
	// accepted).
	// Others fail with an error wrapping errors.ErrUnsupported.
	Arch string
	// Target is the machine's: its ByteOrder and PtrSize must be known
	// (memory.Target.Check). A zero PageSize (the arm64 granule) is
	// taken from VMCOREINFO's PAGESIZE, or is the architecture's only
	// page size.
	memory.Target
	// Info is the dump's VMCOREINFO. It may be nil; New then fails with an
	// error wrapping vmcoreinfo.ErrMissingInfo where the architecture needs
	// it.
	Info *vmcoreinfo.Info
	// Phys reads physical memory.
	Phys memory.Reader
	// Virtual optionally reads the dump's own virtual map (ELF p_vaddr, as
	// in /proc/vmcore and /proc/kcore). Reads fall back to it where the
	// translation fails; Verify compares the two.
	Virtual memory.Reader
	// PhysBase is x86_64's phys_base from elsewhere (the kdump sub-header),
	// used when VMCOREINFO lacks NUMBER(phys_base).
	PhysBase *uint64
	// PhysRanges optionally yields the dump's saved physical ranges
	// [start, last] in ascending order. 32-bit ARM takes its PHYS_OFFSET
	// candidates from them: VMCOREINFO does not carry it.
	PhysRanges func(yield func(start, last uint64) bool)
}

// Translator reads kernel virtual memory and translates kernel virtual
// addresses to physical ones. It is not safe for concurrent use.
type Translator interface {
	// ReadAt reads kernel virtual memory, spanning pages. Faults are
	// *memory.FaultError with the virtual address (see the package doc).
	memory.Reader
	// Translate returns the physical address of vaddr, or a
	// *memory.FaultError naming the level that failed.
	Translate(vaddr uint64) (paddr uint64, err error)
	// Layout describes what New found: offsets, paging levels, fast paths.
	Layout() Layout
	// Stats counts how translations were answered since New.
	Stats() Stats
	// Describe is Layout and Stats as text, one "key: value" per line, for
	// a CLI's info command.
	Describe() string
}

// Layout is what New learned about the kernel's address space.
type Layout struct {
	Arch     string
	PageSize int
	// Levels is the number of paging levels of the walk; 0 if there is no
	// walk (s390x, or the top-level table is unknown).
	Levels int
	// Root is the physical address of the top-level page table.
	Root uint64
	// PhysBase is x86_64's phys_base, as 64-bit two's complement, or
	// 32-bit ARM's PHYS_OFFSET.
	PhysBase       uint64
	PhysBaseSource string
	// KernelOffset is KERNELOFFSET, the KASLR slide of the kernel image.
	KernelOffset uint64
	// DirectMap is the virtual base of the linear map of physical memory
	// (x86_64 page_offset_base, arm64/arm/i386 PAGE_OFFSET); 0 if unknown.
	DirectMap       uint64
	DirectMapSource string
	// FastPaths are the linear ranges translated without a walk.
	FastPaths []FastPath
	// Modules are the address ranges [start, end) the kernel allocates
	// module memory from, most likely first, where the architecture's
	// layout determines them and VMCOREINFO does not print them (ppc64,
	// s390x; docs/formats.md §4.8); nil elsewhere. A scan for struct
	// module looks there.
	Modules [][2]uint64
	// Notes record decisions and fallbacks, e.g. a fast path left off.
	Notes []string
}

// FastPath is a linear range: pa = va − Delta (mod 2^64) for va in
// [Start, Last].
type FastPath struct {
	Name        string
	Start, Last uint64
	Delta       uint64
}

// Stats counts translations by how they were answered.
type Stats struct {
	TLBHits, FastPath, Walks, Faults, VirtualReads uint64
}

// New returns a Translator for cfg. Errors wrap errors.ErrUnsupported (an
// architecture without support, or an *UnsupportedError for a pointer
// size, page size or VA_BITS it does not support),
// vmcoreinfo.ErrMissingInfo (a *MissingError: VMCOREINFO is nil or lacks
// what the architecture needs) or a *memory.FaultError (the top-level
// page table could not be read).
func New(cfg Config) (Translator, error) {
	if cfg.Phys == nil {
		return nil, errors.New("vtop: Config.Phys is nil")
	}
	if err := cfg.Target.Check(); err != nil {
		return nil, fmt.Errorf("vtop: %w", err)
	}
	var (
		t   *translator
		err error
	)
	switch strings.ToLower(cfg.Arch) {
	case "x86_64", "amd64", "x86-64":
		t, err = newX86_64(cfg)
	case "arm64", "aarch64":
		t, err = newARM64(cfg)
	case "arm", "armhf", "armv7l", "armv7":
		t, err = newARM(cfg)
	case "i386", "386", "i686", "x86", "i586":
		t, err = newI386(cfg)
	case "s390x", "s390":
		t, err = newS390X(cfg)
	case "ppc64le", "ppc64", "powerpc64", "powerpc64le", "ppc64el":
		t, err = newPPC64(cfg)
	case "riscv64":
		t, err = newRISCV64(cfg)
	default:
		return nil, fmt.Errorf("vtop: architecture %q: %w", cfg.Arch, errors.ErrUnsupported)
	}
	if err != nil {
		return nil, err
	}
	t.phys = cfg.Phys
	t.virtual = cfg.Virtual
	t.pageSize = 1 << t.pageShift
	t.layout.PageSize = int(t.pageSize)
	return t, nil
}

// tlbSize is the number of TLB entries: 256 pages (1 MiB with 4 KiB pages)
// covers a kallsyms table read or a module-list walk's working set while
// staying small enough to clear cheaply.
const tlbSize = 256

type tlbEntry struct {
	tag uint64 // vpn+1; 0 = empty
	pfn uint64
}

// walkFunc translates va by walking page tables; errors are
// *memory.FaultError with Addr = va.
type walkFunc func(va uint64) (uint64, error)

// translator is the architecture-independent part: TLB, fast paths, walk,
// reads.
type translator struct {
	phys, virtual memory.Reader
	pageShift     uint
	pageSize      uint64
	fast          []FastPath
	canon         func(uint64) uint64 // nil, or strips pointer tags
	walk          walkFunc            // nil: no walk
	pt            func() *ptWalker    // the walk's tables, for Mapped (mapped.go)
	noWalk        error               // why walk is nil
	tlb           [tlbSize]tlbEntry
	stats         Stats
	layout        Layout
}

// Translate implements Translator.
func (t *translator) Translate(va uint64) (uint64, error) {
	if t.canon != nil {
		va = t.canon(va)
	}
	vpn := va >> t.pageShift
	e := &t.tlb[vpn%tlbSize]
	if e.tag == vpn+1 {
		t.stats.TLBHits++
		return e.pfn<<t.pageShift | va&(t.pageSize-1), nil
	}
	pa, err := t.translateSlow(va)
	if err != nil {
		t.stats.Faults++
		return 0, err
	}
	e.tag, e.pfn = vpn+1, pa>>t.pageShift
	return pa, nil
}

func (t *translator) translateSlow(va uint64) (uint64, error) {
	for i := range t.fast {
		f := &t.fast[i]
		if va >= f.Start && va <= f.Last {
			t.stats.FastPath++
			return va - f.Delta, nil
		}
	}
	if t.walk == nil {
		return 0, memory.Fault(va, space, "no linear mapping and no page-table walk", t.noWalk)
	}
	t.stats.Walks++
	return t.walk(va)
}

// maxRun is the most ReadAt reads with one physical read: enough pages
// for a compressed dump to decode on several goroutines, and less than the
// size at which a copy bypasses the CPU caches (Go's memmove switches to
// non-temporal stores for large moves), which made a 5 MB BTF read through
// an ELF core leave the parser reading from memory: its phase went from
// 12 to 15–40 ms.
const maxRun = 256 << 10

// ReadAt implements memory.Reader over kernel virtual memory. Pages that
// translate to physically contiguous memory (the kernel image, the direct
// map) are read with one physical read of up to maxRun bytes, which lets a
// compressed dump decode them together. Where a page does not translate and
// Config.Virtual was given, that page is read from Config.Virtual instead.
func (t *translator) ReadAt(p []byte, va uint64) (int, error) {
	done := 0
	// A run of pages read so far only in translation: p[runStart:done]
	// is physical memory from runPA on.
	runStart, runPA := 0, uint64(0)
	flush := func() error {
		if runStart == done {
			return nil
		}
		want := done - runStart
		m, err := t.phys.ReadAt(p[runStart:done], runPA)
		if m < want {
			if err == nil {
				err = memory.ErrNotSaved
			}
			done = runStart + m
			return memory.Fault(va+uint64(done), space, fmt.Sprintf("read at physical %#x", runPA+uint64(m)), err)
		}
		runStart = done
		return nil
	}
	for done < len(p) {
		cur := va + uint64(done)
		if done > 0 && cur == 0 {
			if err := flush(); err != nil {
				return done, err
			}
			return done, memory.Fault(va, space, fmt.Sprintf("read of %d bytes wraps the address space", len(p)), memory.ErrCorrupt)
		}
		n := int(min(uint64(len(p)-done), t.pageSize-cur&(t.pageSize-1)))
		pa, err := t.Translate(cur)
		if err == nil {
			if runStart == done {
				runPA = pa
			} else if runPA+uint64(done-runStart) != pa || done-runStart >= maxRun {
				if err := flush(); err != nil {
					return done, err
				}
				runPA = pa
			}
			done += n
			continue
		}
		if err := flush(); err != nil {
			return done, err
		}
		if t.virtual != nil {
			m, verr := t.virtual.ReadAt(p[done:done+n], cur)
			t.stats.VirtualReads++
			done += m
			runStart = done
			if verr == nil && m == n {
				continue
			}
		}
		return done, err
	}
	if err := flush(); err != nil {
		return done, err
	}
	return done, nil
}

func (t *translator) Layout() Layout {
	l := t.layout
	l.FastPaths = append([]FastPath(nil), t.fast...)
	l.Modules = append([][2]uint64(nil), t.layout.Modules...)
	l.Notes = append([]string(nil), t.layout.Notes...)
	return l
}

func (t *translator) Stats() Stats { return t.stats }

func (t *translator) Describe() string {
	var b strings.Builder
	l := t.Layout()
	fmt.Fprintf(&b, "arch: %s\npage size: %d\n", l.Arch, l.PageSize)
	if l.Levels > 0 {
		fmt.Fprintf(&b, "paging levels: %d\npage-table root: physical %#x\n", l.Levels, l.Root)
	} else {
		fmt.Fprintf(&b, "page-table walk: off (%v)\n", t.noWalk)
	}
	if l.PhysBaseSource != "" {
		fmt.Fprintf(&b, "phys_base: %#x (%d, from %s)\n", l.PhysBase, int64(l.PhysBase), l.PhysBaseSource)
	}
	fmt.Fprintf(&b, "kernel offset: %#x\n", l.KernelOffset)
	if l.DirectMapSource != "" {
		fmt.Fprintf(&b, "direct map: %#x (from %s)\n", l.DirectMap, l.DirectMapSource)
	} else {
		fmt.Fprintf(&b, "direct map: unknown\n")
	}
	for _, f := range l.FastPaths {
		fmt.Fprintf(&b, "fast path: %s [%#x, %#x] pa = va - %#x\n", f.Name, f.Start, f.Last, f.Delta)
	}
	for _, m := range l.Modules {
		fmt.Fprintf(&b, "module area: [%#x, %#x)\n", m[0], m[1])
	}
	for _, n := range l.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	s := t.stats
	fmt.Fprintf(&b, "translations: tlb %d, fast path %d, walks %d, faults %d, virtual reads %d\n",
		s.TLBHits, s.FastPath, s.Walks, s.Faults, s.VirtualReads)
	return b.String()
}

func (t *translator) note(format string, args ...any) {
	t.layout.Notes = append(t.layout.Notes, fmt.Sprintf(format, args...))
}

// flush empties the TLB (used when a fast path changes during New).
func (t *translator) flush() { t.tlb = [tlbSize]tlbEntry{} }

// Verify reads n bytes at each of vaddrs through t and through virtual (the
// dump's own virtual map) and reports the first address where both reads
// succeed and the bytes differ, as an error wrapping memory.ErrCorrupt.
// Addresses either reader cannot read are skipped; Verify returns the
// number of addresses actually compared.
func Verify(t Translator, virtual memory.Reader, n int, vaddrs ...uint64) (compared int, err error) {
	a, b := make([]byte, n), make([]byte, n)
	for _, va := range vaddrs {
		if memory.ReadFull(t, a, va) != nil || memory.ReadFull(virtual, b, va) != nil {
			continue
		}
		compared++
		if !bytes.Equal(a, b) {
			return compared, memory.Fault(va, space, "translation disagrees with the dump's virtual map", memory.ErrCorrupt)
		}
	}
	return compared, nil
}

// readEntry reads one page-table entry of size bytes (4 or 8) at physical
// address at; on failure it returns a fault for va naming the level.
func readEntry(phys memory.Reader, bo binary.ByteOrder, size int, va uint64, level string, at uint64) (uint64, error) {
	var buf [8]byte
	if err := memory.ReadFull(phys, buf[:size], at); err != nil {
		return 0, entryFault(va, level, at, err)
	}
	if size == 4 {
		return uint64(bo.Uint32(buf[:4])), nil
	}
	return bo.Uint64(buf[:]), nil
}

func notPresent(va uint64, level string, entry, at uint64) error {
	return badEntry(va, level, entry, at, "not present", ErrNotMapped)
}

// pageShiftOf returns log2(size) for a power of two ≥ 1 KiB, or 0.
func pageShiftOf(size uint64) uint {
	if size < 1024 || size&(size-1) != 0 || size > 1<<30 {
		return 0
	}
	s := uint(0)
	for size > 1 {
		size >>= 1
		s++
	}
	return s
}
