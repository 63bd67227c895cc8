package diskdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"time"
)

// Header describes a kdump-compressed dump: the disk_dump_header and
// kdump_sub_header of its first file, and how the set is laid out.
//
// The embedded Utsname's Version field is shadowed by Header.Version (the
// header_version); read the kernel's version string as h.Utsname.Version.
type Header struct {
	Version int // header_version: 0..6 from known writers
	Utsname
	Timestamp    time.Time // zero when the writer left it zero (QEMU)
	Status       uint32    // Status* flags
	BlockSize    int       // page size of the target
	SubHdrSize   int       // kdump_sub_header size in blocks
	BitmapBlocks uint64    // blocks of both bitmaps
	MaxMapnr     uint64    // number of page frames (max_mapnr_64 from v6)
	CurrentCPU   uint32
	NrCPUs       int
	PhysBase     uint64 // sub-header phys_base (QEMU writes it wrongly on x86-64; prefer VMCOREINFO)
	DumpLevel    int    // makedumpfile -d level
	ByteOrder    binary.ByteOrder
	PtrSize      int    // 4 or 8: the writer's unsigned long
	SubLayout    string // "64-bit", "32-bit packed" or "32-bit padded"
	PFNOffset    uint64 // pfn = paddr>>shift - PFNOffset (ARM32 only; else 0)
	Flattened    bool   // any part is a flattened (-F) stream
	Split        bool   // the dump was written with --split
	Parts        []Part // one per file, in pfn order
}

// Utsname is the kernel's struct new_utsname at dump time. QEMU fills only
// Machine.
type Utsname struct {
	Sysname, Nodename, Release, Version, Machine, Domainname string
}

// Part describes one file of a dump: the pfn range [StartPFN, EndPFN) it
// holds (all pfns for an unsplit dump), and how many pages it saved.
type Part struct {
	StartPFN, EndPFN uint64
	Flattened        bool
	Pages            uint64 // set bits of the 2nd bitmap within the range
	Size             int64  // logical file size (after -R rearrangement for flattened parts)
}

// Incomplete reports whether the writer ran out of space: pages past the
// last written one are lost.
func (h Header) Incomplete() bool { return h.Status&StatusIncomplete != 0 }

// partHeader is everything parsed from one file's headers.
type partHeader struct {
	h            Header
	layout       *headerLayout
	sub          *subLayout
	shift        uint
	bitmapOff    int64 // of the 2nd (or only) bitmap
	bitmapLen    int64 // bytes of that bitmap
	descOff      int64
	split        bool
	start, end   uint64 // pfn range of this part
	vmcoreinfo   blob
	note         blob
	eraseinfo    blob
	maxMapnr32   uint32
	headerStatus uint32
}

type blob struct{ off, size int64 }

// machine32 and machine64 recognise utsname.machine strings of 32- and
// 64-bit kernels, to try the matching header layout first.
func machineBits(m string) int {
	switch {
	case m == "x86_64" || m == "aarch64" || m == "arm64" || strings.HasPrefix(m, "ppc64") ||
		m == "s390x" || m == "riscv64" || m == "mips64" || m == "loongarch64" ||
		m == "sparc64" || m == "ia64" || m == "alpha":
		return 64
	case len(m) == 4 && m[0] == 'i' && m[2:] == "86", strings.HasPrefix(m, "arm"),
		m == "ppc" || m == "s390" || m == "riscv32" || m == "mips" || m == "sparc" || m == "sh":
		return 32
	}
	return 0
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// parseHeader reads the headers of one file, of logical size size. It
// tries both byte orders and both pointer sizes and keeps the first
// combination that is consistent throughout (power-of-two block size,
// bitmaps and sub-header blobs inside the file, bitmap covering max_mapnr).
func parseHeader(r io.ReaderAt, size int64) (*partHeader, error) {
	var b [headerReadSz]byte
	n, err := r.ReadAt(b[:min(int64(len(b)), size)], 0)
	if n < 8 {
		if err == nil || err == io.EOF {
			return nil, ErrUnrecognizedFormat
		}
		return nil, fmt.Errorf("diskdump: header: %w", err)
	}
	switch string(b[:8]) {
	case sigKdump:
	case sigDiskdump:
		return nil, fmt.Errorf("diskdump: old DISKDUMP format (pre-kdump diskdump driver): %w", errors.ErrUnsupported)
	default:
		return nil, ErrUnrecognizedFormat
	}
	if n < layout32.Size {
		return nil, formatErr(0, uint64(n), "header truncated")
	}
	machine := cstr(b[offMachine : offMachine+utsFieldLen])
	layouts := []*headerLayout{&layout64, &layout32}
	if machineBits(machine) == 32 {
		layouts[0], layouts[1] = layouts[1], layouts[0]
	}
	// Every byte order and pointer size is tried, strictly first. The
	// error reported is that of the likeliest reading (a block_size that
	// is a page size, a header_version makedumpfile writes, checks passed
	// beyond the version): a big-endian header that fails says what is
	// wrong with it read as big-endian, not that its little-endian reading
	// has an implausible version.
	type attempt struct {
		err  error
		bo   binary.ByteOrder
		l    *headerLayout
		rank int
	}
	var best *attempt
	note := func(a attempt) {
		if best == nil || a.rank > best.rank {
			best = &a
		}
	}
	likely := func(bo binary.ByteOrder, l *headerLayout, deeper bool) int {
		rank := 0
		switch bo.Uint32(b[l.BlockSize:]) {
		case 4096, 8192, 16384, 65536:
			rank += 2
		}
		if v := bo.Uint32(b[offVersion:]); v <= likelyMaxVersion {
			rank++
		}
		if deeper {
			rank++
		}
		return rank
	}
	orders := []binary.ByteOrder{binary.LittleEndian, binary.BigEndian}
	for _, lenient := range []bool{false, true} {
		for _, bo := range orders {
			v := int32(bo.Uint32(b[offVersion:]))
			if v < 0 || v > maxHeaderVersion {
				if !lenient {
					note(attempt{formatErr(offVersion, uint64(uint32(v)), "implausible header_version"), bo, layouts[0], likely(bo, layouts[0], false)})
				}
				continue
			}
			for _, l := range layouts {
				if n < l.Size {
					continue
				}
				ph, err := tryHeader(r, size, b[:n], bo, l, machine, lenient)
				if err == nil {
					return ph, nil
				}
				var fe *FormatError
				if !errors.As(err, &fe) {
					return nil, err // I/O error
				}
				if !lenient {
					note(attempt{err, bo, l, likely(bo, l, true)})
				}
			}
		}
	}
	return nil, &HeaderError{ByteOrder: best.bo, PtrSize: best.l.PtrSize, Err: best.err}
}

// tryHeader reads the header as byte order bo and layout l. Lenient
// accepts what only libkdumpfile's generated dumps write: sub_hdr_size 0
// in a version 1+ header (no kdump_sub_header), and bitmap_blocks 0 (no
// pages at all); strictly, those are what tells a wrong reading apart.
func tryHeader(r io.ReaderAt, size int64, b []byte, bo binary.ByteOrder, l *headerLayout, machine string, lenient bool) (*partHeader, error) {
	ph := &partHeader{layout: l}
	h := &ph.h
	h.ByteOrder = bo
	h.PtrSize = l.PtrSize
	h.Version = int(int32(bo.Uint32(b[offVersion:])))
	uts := b[offUtsname:]
	h.Utsname = Utsname{
		Sysname:    cstr(uts[0*utsFieldLen : 1*utsFieldLen]),
		Nodename:   cstr(uts[1*utsFieldLen : 2*utsFieldLen]),
		Release:    cstr(uts[2*utsFieldLen : 3*utsFieldLen]),
		Version:    cstr(uts[3*utsFieldLen : 4*utsFieldLen]),
		Machine:    machine,
		Domainname: cstr(uts[5*utsFieldLen : 6*utsFieldLen]),
	}
	var sec, usec int64
	if l.PtrSize == 8 {
		sec, usec = int64(bo.Uint64(b[l.Timestamp:])), int64(bo.Uint64(b[l.Timestamp+8:]))
	} else {
		sec, usec = int64(int32(bo.Uint32(b[l.Timestamp:]))), int64(int32(bo.Uint32(b[l.Timestamp+4:])))
	}
	if sec != 0 || usec != 0 {
		h.Timestamp = time.Unix(sec, usec*1000).UTC()
	}
	h.Status = bo.Uint32(b[l.Status:])
	bs := int32(bo.Uint32(b[l.BlockSize:]))
	if bs < minBlockSize || bs > maxBlockSize || bs&(bs-1) != 0 {
		return nil, formatErr(int64(l.BlockSize), uint64(uint32(bs)), "block_size is not a power of two in [%d, %d]", minBlockSize, maxBlockSize)
	}
	h.BlockSize = int(bs)
	ph.shift = uint(bits.TrailingZeros32(uint32(bs)))
	// sub_hdr_size 0 in a version 1+ header means no kdump_sub_header;
	// the bitmaps follow the header block directly.
	sub := int32(bo.Uint32(b[l.SubHdrSize:]))
	if sub < 0 || (h.Version >= 1 && sub < 1 && !lenient) {
		return nil, formatErr(int64(l.SubHdrSize), uint64(uint32(sub)), "bad sub_hdr_size")
	}
	h.SubHdrSize = int(sub)
	// bitmap_blocks 0 is a dump of no pages: consistent only with
	// max_mapnr 0, which the bitmap-size check below enforces.
	h.BitmapBlocks = uint64(bo.Uint32(b[l.BitmapBlocks:]))
	if h.BitmapBlocks == 0 && !lenient {
		return nil, formatErr(int64(l.BitmapBlocks), 0, "bitmap_blocks is zero")
	}
	ph.maxMapnr32 = bo.Uint32(b[l.MaxMapnr:])
	h.MaxMapnr = uint64(ph.maxMapnr32)
	h.CurrentCPU = bo.Uint32(b[l.CurrentCPU:])
	h.NrCPUs = int(int32(bo.Uint32(b[l.NrCPUs:])))

	bsz := int64(bs)
	bmStart := (1 + int64(sub)) * bsz
	bmLen := int64(h.BitmapBlocks) * bsz
	if bmStart+bmLen > size {
		return nil, formatErr(int64(l.BitmapBlocks), h.BitmapBlocks, "bitmaps (%d blocks at %#x) extend beyond end of file (%#x)", h.BitmapBlocks, bmStart, size)
	}
	ph.descOff = bmStart + bmLen

	if h.Version >= 1 && sub > 0 {
		if err := ph.parseSub(r, size, bmStart); err != nil {
			return nil, err
		}
	}
	if machineBits(machine) != 64 && l.PtrSize == 4 && strings.HasPrefix(machine, "arm") {
		// makedumpfile numbers ARM32 pfns from the start of RAM.
		h.PFNOffset = h.PhysBase >> ph.shift
	}

	bmBits := uint64(bmLen) * 8
	switch {
	case h.MaxMapnr <= bmBits/2:
		ph.bitmapLen = bmLen / 2
		ph.bitmapOff = bmStart + ph.bitmapLen
	case h.MaxMapnr <= bmBits:
		// Too small for two bitmaps: an old dump with only one, as
		// crash and libkdumpfile read it.
		ph.bitmapLen = bmLen
		ph.bitmapOff = bmStart
	default:
		return nil, formatErr(int64(l.MaxMapnr), h.MaxMapnr, "bitmap of %d bits cannot cover max_mapnr", bmBits)
	}
	if !ph.split {
		ph.start, ph.end = 0, h.MaxMapnr
	} else {
		if ph.start > ph.end || ph.start > h.MaxMapnr {
			return nil, formatErr(int64(bsz), ph.start, "split pfn range [%#x, %#x) outside max_mapnr %#x", ph.start, ph.end, h.MaxMapnr)
		}
		ph.end = min(ph.end, h.MaxMapnr)
	}
	return ph, nil
}

// parseSub reads the kdump_sub_header at file offset block_size.
func (ph *partHeader) parseSub(r io.ReaderAt, size, payload int64) error {
	h := &ph.h
	bo := h.ByteOrder
	bsz := int64(h.BlockSize)
	var b [104]byte
	if _, err := r.ReadAt(b[:], bsz); err != nil {
		if err != io.EOF {
			return fmt.Errorf("diskdump: sub-header at %#x: %w", bsz, err)
		}
		return formatErr(bsz, 0, "sub-header truncated")
	}
	u64 := func(off int) uint64 { return bo.Uint64(b[off:]) }
	ulong := func(s *subLayout, off int) uint64 {
		if s.Long == 8 {
			return bo.Uint64(b[off:])
		}
		return uint64(bo.Uint32(b[off:]))
	}
	s := &sub64
	if ph.layout.PtrSize == 4 {
		s = &sub32pack
		switch {
		case strings.HasPrefix(h.Machine, "arm"):
			s = &sub32pad
		case len(h.Machine) == 4 && h.Machine[0] == 'i':
		case h.Version >= 3:
			// Unknown 32-bit writer: packed if VMCOREINFO then lands
			// inside the sub-header blocks (or is absent), else padded.
			off, n := int64(u64(s.OffVmcoreinfo)), int64(ulong(s, s.SizeVmcoreinfo))
			if !((off == 0 && n == 0) || (off > bsz && n >= 0 && off+n <= payload)) {
				s = &sub32pad
			}
		}
	}
	ph.sub = s
	h.SubLayout = s.Name
	h.PhysBase = ulong(s, s.PhysBase)
	h.DumpLevel = int(int32(bo.Uint32(b[s.DumpLevel:])))
	readBlob := func(what string, fieldOff int, off uint64, n uint64) (blob, error) {
		if off == 0 && n == 0 {
			return blob{}, nil
		}
		if n > maxBlobSize || off > uint64(size) || n > uint64(size)-off {
			return blob{}, formatErr(bsz+int64(fieldOff), off, "%s (%d bytes) outside the file", what, n)
		}
		return blob{int64(off), int64(n)}, nil
	}
	var err error
	if h.Version >= 2 && bo.Uint32(b[s.Split:]) != 0 {
		ph.split = true
		ph.start, ph.end = ulong(s, s.StartPFN), ulong(s, s.EndPFN)
	}
	if h.Version >= 3 {
		if ph.vmcoreinfo, err = readBlob("VMCOREINFO", s.OffVmcoreinfo, u64(s.OffVmcoreinfo), ulong(s, s.SizeVmcoreinfo)); err != nil {
			return err
		}
	}
	if h.Version >= 4 {
		if ph.note, err = readBlob("ELF notes", s.OffNote, u64(s.OffNote), ulong(s, s.SizeNote)); err != nil {
			return err
		}
	}
	if h.Version >= 5 {
		if ph.eraseinfo, err = readBlob("eraseinfo", s.OffEraseinfo, u64(s.OffEraseinfo), ulong(s, s.SizeEraseinfo)); err != nil {
			return err
		}
	}
	if h.Version >= 6 {
		if ph.split {
			ph.start, ph.end = u64(s.StartPFN64), u64(s.EndPFN64)
		}
		if m := u64(s.MaxMapnr64); m != 0 {
			h.MaxMapnr = m
		}
	}
	return nil
}
