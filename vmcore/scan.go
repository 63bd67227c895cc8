package vmcore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// notePattern is what follows the 12-byte note header of the VMCOREINFO
// note: the name with its NUL and one pad byte, then the first line the
// kernel writes (docs/formats.md §2.6, §7.8). The separate text page
// vmcoreinfo_data has no header and does not match.
var notePattern = []byte("VMCOREINFO\x00\x00OSRELEASE=")

const (
	// scanChunk is how much physical memory one scan read covers.
	scanChunk = 1 << 20
	// noteNameOff is where the name starts in a note: after the header.
	noteNameOff = 12
	// s390LowcoreVmcoreInfo is the physical address of the lowcore's u64
	// vmcore_info, the note's physical address on s390 (docs/formats.md §2.6).
	s390LowcoreVmcoreInfo = 0xe0c
	// holeSkip is the granule a hole inside a saved range is skipped by:
	// the smallest page size.
	holeSkip = 4096
)

// findInMemory looks for the VMCOREINFO note in physical memory when the
// container did not carry it.
func (d *Dump) findInMemory(a Arch, opt Options) {
	if at, text, src, bo, ok := d.noteInMemory(a, opt.ScanLimit); ok {
		d.origin = InfoOrigin{Kind: src, Addr: at}
		d.raw, d.infoSource = text, fmt.Sprintf("%s at %#x", src, at)
		d.noteOrder = bo
	}
}

// FindVMCOREINFONote finds the VMCOREINFO note in the dump's physical
// memory the way Open does for a dump whose container carries none (and
// OpenWith with Options.ForceScan): on s390 through the lowcore's pointer
// to it, else by scanning the saved ranges in ascending order for the
// first note whose text parses, reading at most limit bytes (0 means
// DefaultScanLimit; a negative limit disables the scan). It returns the
// note's physical address, where its 12-byte header starts. Its reads go
// through Physical, so an Options.WrapPhysical recorder sees them.
// kdump-syms extract uses it to keep the note of a dump whose container
// carries VMCOREINFO, so that a scan of the extract finds it too.
func (d *Dump) FindVMCOREINFONote(limit int64) (addr uint64, ok bool) {
	addr, _, _, _, ok = d.noteInMemory(d.arch, limit)
	return addr, ok
}

// noteInMemory is FindVMCOREINFONote for architecture a, with the note's
// text, how it was found ("s390-lowcore" or "memory-scan") and the byte
// order its header is in: the kernel's own.
func (d *Dump) noteInMemory(a Arch, scanLimit int64) (at uint64, text []byte, source string, bo binary.ByteOrder, ok bool) {
	phys := d.phys
	if a.Name == "s390x" || a.Name == "s390" {
		if at, err := memory.Uint64(phys, binary.BigEndian, s390LowcoreVmcoreInfo); err == nil && at != 0 {
			if text, ok := noteAt(phys, at, binary.BigEndian); ok {
				return at, text, InfoS390Lowcore, binary.BigEndian, true
			}
		}
	}
	if scanLimit < 0 {
		return 0, nil, "", nil, false
	}
	limit := scanLimit
	if limit == 0 {
		limit = DefaultScanLimit
	}
	at, text, bo, ok = scanForNote(phys, d.be.ranges, a, uint64(limit))
	return at, text, InfoMemoryScan, bo, ok
}

// scanForNote reads the saved ranges in ascending order, in scanChunk
// pieces overlapping by the header and pattern length, and returns the
// first note whose text parses, with the byte order of its header. At most
// limit bytes are read. Both byte orders are tried, the container's first:
// the container's order is not always the kernel's (QEMU 7.2 writes the
// headers of ppc64le dumps big-endian, docs/formats.md §3.8), and a note
// header read in the wrong order has a namesz of 11<<24, so it never
// validates.
func scanForNote(phys memory.Reader, ranges func(func(uint64, uint64) bool), a Arch, limit uint64) (uint64, []byte, binary.ByteOrder, bool) {
	const overlap = noteNameOff + 22 // header + len(notePattern)
	orders := []binary.ByteOrder{binary.LittleEndian, binary.BigEndian}
	if a.ByteOrder == binary.ByteOrder(binary.BigEndian) {
		orders[0], orders[1] = orders[1], orders[0]
	}
	var foundAt uint64
	var found []byte
	var foundOrder binary.ByteOrder
	walkChunks(phys, ranges, limit, overlap, func(b []byte, addr, _ uint64) bool {
		for i := 0; ; {
			j := bytes.Index(b[i:], notePattern)
			if j < 0 {
				return true
			}
			pos := i + j
			i = pos + 1
			at := addr + uint64(pos) - noteNameOff
			if at > addr+uint64(pos) {
				continue // the header would lie below address 0
			}
			for _, bo := range orders {
				if text, ok := noteAt(phys, at, bo); ok {
					foundAt, found, foundOrder = at, text, bo
					return false
				}
			}
		}
	})
	return foundAt, found, foundOrder, found != nil
}

// walkChunks reads the saved ranges in ascending order, at most limit
// bytes, in chunks of scanChunk bytes that overlap the next by overlap
// bytes (so that a pattern across a boundary is seen), skipping a hole
// inside a range to the next holeSkip boundary, and hands each chunk to fn
// with body, the length of its part the next chunk does not read again.
// fn returns false to stop the walk.
func walkChunks(phys memory.Reader, ranges func(func(uint64, uint64) bool), limit, overlap uint64, fn func(b []byte, addr, body uint64) bool) {
	buf := make([]byte, scanChunk+overlap)
	var scanned uint64
	ranges(func(start, last uint64) bool {
		for addr := start; ; {
			if scanned >= limit {
				return false
			}
			n := scanChunk + overlap
			if last-addr < n-1 {
				n = last - addr + 1
			}
			got, _ := phys.ReadAt(buf[:n], addr)
			scanned += uint64(got)
			body := uint64(got)
			if uint64(got) == n && last-addr > n-1 {
				body = n - overlap
			}
			if !fn(buf[:got], addr, body) {
				return false
			}
			if uint64(got) < n {
				// A hole inside the range: skip to the page after it.
				next := (addr + uint64(got) + holeSkip) &^ (holeSkip - 1)
				scanned += next - addr - uint64(got)
				if next <= addr || next > last {
					break
				}
				addr = next
				continue
			}
			if last-addr <= n-1 {
				break
			}
			addr += n - overlap
		}
		return true
	})
}

// noteAt validates the VMCOREINFO note header at physical address at and
// returns its text if it parses.
func noteAt(phys memory.Reader, at uint64, bo binary.ByteOrder) ([]byte, bool) {
	var h [noteNameOff + 12]byte
	if memory.ReadFull(phys, h[:], at) != nil {
		return nil, false
	}
	namesz, descsz, typ := bo.Uint32(h[0:]), bo.Uint32(h[4:]), bo.Uint32(h[8:])
	if namesz != 11 || typ != 0 || descsz == 0 || descsz > vmcoreinfo.MaxSize || string(h[noteNameOff:noteNameOff+11]) != "VMCOREINFO\x00" {
		return nil, false
	}
	text := make([]byte, descsz)
	if memory.ReadFull(phys, text, at+noteNameOff+12) != nil {
		return nil, false
	}
	if _, err := vmcoreinfo.Parse(text); err != nil {
		return nil, false
	}
	return text, true
}
