package extract

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/internal/kdumpfmt"
)

// Kdump describes a kdump-compressed dump for WriteKdump.
type Kdump struct {
	// Header gives the disk_dump_header and kdump_sub_header fields:
	// Version (3..6 keep VMCOREINFO, 4.. the notes, 5.. eraseinfo, 6 the
	// 64-bit max_mapnr and split range), Utsname, Timestamp, Status,
	// BlockSize, MaxMapnr, CurrentCPU, NrCPUs, PhysBase, DumpLevel,
	// ByteOrder, PtrSize and SubLayout, as diskdump.Dump.Header reports
	// them. StatusIncomplete is cleared: the output is complete.
	Header     diskdump.Header
	VMCOREINFO []byte
	Notes      []byte // the ELF note blob
	EraseInfo  []byte
	// Pages are the page frame numbers to save, in increasing order; they
	// make the 2nd bitmap. Pages, Exists and Page number frames physically
	// (pfn = paddr / BlockSize), as diskdump.Dump does; with a
	// Header.PFNOffset (makedumpfile's ARM32 files, which number frames
	// from phys_base) the file's bitmaps are written from that offset,
	// while Parts are in the file's own numbering, as Header.Parts.
	Pages []uint64
	// Exists yields page frame numbers for the 1st bitmap (page exists)
	// besides Pages, in any order; nil adds none.
	Exists iter.Seq[uint64]
	// Page returns the descriptor flags and stored bytes of a page in
	// Pages, as diskdump.Dump.RawPage does.
	Page func(pfn uint64) (flags uint32, data []byte, err error)
	// Parts splits the dump into files holding the pfn ranges
	// [Start, End), as makedumpfile --split does; nil writes one file.
	Parts []PFNRange
}

// PFNRange is the range of page frame numbers [Start, End).
type PFNRange struct{ Start, End uint64 }

// PFNError reports a page of Kdump.Pages that the header's bitmaps do not
// cover: PFN lies below First (Header.PFNOffset, the dump's first frame)
// or at or beyond First+MaxMapnr (Header.MaxMapnr).
type PFNError struct {
	PFN      uint64
	First    uint64
	MaxMapnr uint64
}

func (e *PFNError) Error() string {
	if e.PFN < e.First {
		return fmt.Sprintf("extract: pfn %#x below the dump's first pfn %#x", e.PFN, e.First)
	}
	return fmt.Sprintf("extract: pfn %#x beyond max_mapnr %#x", e.PFN, e.MaxMapnr)
}

const (
	kdSmallBlob = 256 // stored blobs up to this size are shared when equal (the zero page)
)

// WriteKdump writes k to ws: one writer, or one per part of k.Parts.
// Each file gets full headers and both full bitmaps, and the descriptors
// and data of the pages in its range. Errors are those of the writers and
// of k.Page, a *PFNError for a page the header's bitmaps do not cover, an
// error wrapping errors.ErrUnsupported for a layout it cannot write, and
// an error for other inconsistent input.
func WriteKdump(ws []io.WriterAt, k *Kdump) error {
	h := k.Header
	parts := k.Parts
	if len(parts) == 0 {
		parts = []PFNRange{{0, h.MaxMapnr}}
	}
	if len(ws) != len(parts) {
		return fmt.Errorf("extract: %d writers for %d parts", len(ws), len(parts))
	}
	bs := h.BlockSize
	if bs < 512 || bs&(bs-1) != 0 {
		return fmt.Errorf("extract: block size %d", bs)
	}
	// ARM32: the reader derives the offset from phys_base for a 32-bit
	// "arm*" machine only (diskdump/header.go); anything else would be
	// read back wrongly.
	pfnOff := h.PFNOffset
	if pfnOff != 0 && (!strings.HasPrefix(h.Machine, "arm") || h.PtrSize != 4 || h.PhysBase/uint64(bs) != pfnOff) {
		return fmt.Errorf("extract: pfn offset %#x with machine %q, %d-byte pointers and phys_base %#x: %w",
			pfnOff, h.Machine, h.PtrSize, h.PhysBase, errors.ErrUnsupported)
	}
	bo := h.ByteOrder
	if bo == nil {
		bo = binary.LittleEndian
	}
	hl := kdumpfmt.Header64
	if h.PtrSize == 4 {
		hl = kdumpfmt.Header32
	}
	layoutName := h.SubLayout
	if layoutName == "" {
		layoutName = "64-bit"
		if h.PtrSize == 4 {
			layoutName = "32-bit packed"
		}
	}
	sl, ok := kdumpfmt.SubLayoutNamed(layoutName)
	if !ok {
		return fmt.Errorf("extract: sub-header layout %q: %w", layoutName, errors.ErrUnsupported)
	}
	if !slices.IsSorted(k.Pages) {
		return errors.New("extract: pages not sorted")
	}
	if n := len(k.Pages); n > 0 && k.Pages[0] < pfnOff {
		return &PFNError{PFN: k.Pages[0], First: pfnOff, MaxMapnr: h.MaxMapnr}
	}
	if n := len(k.Pages); n > 0 && k.Pages[n-1]-pfnOff >= h.MaxMapnr {
		return &PFNError{PFN: k.Pages[n-1], First: pfnOff, MaxMapnr: h.MaxMapnr}
	}

	// Sub-header, notes, then VMCOREINFO when it is not inside the notes.
	subOff := int64(bs)
	notesOff, vmciOff := int64(0), int64(0)
	end := subOff + int64(sl.Size)
	var extra []byte
	if h.Version >= 4 && len(k.Notes) > 0 {
		notesOff = end
		end += int64(len(k.Notes))
	}
	if h.Version >= 3 && len(k.VMCOREINFO) > 0 {
		if i := bytes.Index(k.Notes, k.VMCOREINFO); notesOff != 0 && i >= 0 {
			vmciOff = notesOff + int64(i)
		} else {
			vmciOff = end
			extra = k.VMCOREINFO
			end += int64(len(extra))
		}
	}
	subBlocks := (end - subOff + int64(bs) - 1) / int64(bs)
	bmHalf := ((h.MaxMapnr+7)/8 + uint64(bs) - 1) / uint64(bs) * uint64(bs)
	bmOff := (1 + subBlocks) * int64(bs)
	descOff := bmOff + 2*int64(bmHalf)

	bm1 := make([]byte, bmHalf)
	bm2 := make([]byte, bmHalf)
	for _, p := range k.Pages {
		p -= pfnOff
		bm1[p/8] |= 1 << (p % 8)
		bm2[p/8] |= 1 << (p % 8)
	}
	if k.Exists != nil {
		for p := range k.Exists {
			if p >= pfnOff && p-pfnOff < h.MaxMapnr {
				p -= pfnOff
				bm1[p/8] |= 1 << (p % 8)
			}
		}
	}

	for i, pr := range parts {
		w := ws[i]
		split := len(k.Parts) > 0
		// Block 0: disk_dump_header.
		hdr := make([]byte, bs)
		copy(hdr, kdumpfmt.Signature)
		bo.PutUint32(hdr[kdumpfmt.OffVersion:], uint32(h.Version))
		for j, s := range []string{h.Sysname, h.Nodename, h.Release, h.Utsname.Version, h.Machine, h.Domainname} {
			at := kdumpfmt.OffUtsname + j*kdumpfmt.UtsFieldLen
			copy(hdr[at:at+kdumpfmt.UtsFieldLen-1], s)
		}
		if !h.Timestamp.IsZero() {
			sec, usec := h.Timestamp.Unix(), int64(h.Timestamp.Nanosecond()/int(time.Microsecond))
			if h.PtrSize == 4 {
				bo.PutUint32(hdr[hl.Timestamp:], uint32(sec))
				bo.PutUint32(hdr[hl.Timestamp+4:], uint32(usec))
			} else {
				bo.PutUint64(hdr[hl.Timestamp:], uint64(sec))
				bo.PutUint64(hdr[hl.Timestamp+8:], uint64(usec))
			}
		}
		bo.PutUint32(hdr[hl.Status:], h.Status&^diskdump.StatusIncomplete)
		bo.PutUint32(hdr[hl.BlockSize:], uint32(bs))
		bo.PutUint32(hdr[hl.SubHdrSize:], uint32(subBlocks))
		bo.PutUint32(hdr[hl.BitmapBlocks:], uint32(2*bmHalf/uint64(bs)))
		bo.PutUint32(hdr[hl.MaxMapnr:], uint32(h.MaxMapnr))
		bo.PutUint32(hdr[hl.CurrentCPU:], h.CurrentCPU)
		bo.PutUint32(hdr[hl.NrCPUs:], uint32(h.NrCPUs))

		// kdump_sub_header and what follows it.
		sub := make([]byte, (subBlocks)*int64(bs))
		putLong := func(off int, v uint64) {
			if sl.Long == 8 {
				bo.PutUint64(sub[off:], v)
			} else {
				bo.PutUint32(sub[off:], uint32(v))
			}
		}
		putLong(sl.PhysBase, h.PhysBase)
		if h.Version >= 1 {
			bo.PutUint32(sub[sl.DumpLevel:], uint32(h.DumpLevel))
		}
		if h.Version >= 2 && split {
			bo.PutUint32(sub[sl.Split:], 1)
			putLong(sl.StartPFN, pr.Start)
			putLong(sl.EndPFN, pr.End)
		}
		if vmciOff != 0 {
			bo.PutUint64(sub[sl.OffVmcoreinfo:], uint64(vmciOff))
			putLong(sl.SizeVmcoreinfo, uint64(len(k.VMCOREINFO)))
		}
		if notesOff != 0 {
			bo.PutUint64(sub[sl.OffNote:], uint64(notesOff))
			putLong(sl.SizeNote, uint64(len(k.Notes)))
			copy(sub[notesOff-subOff:], k.Notes)
		}
		if len(extra) > 0 {
			copy(sub[vmciOff-subOff:], extra)
		}
		if h.Version >= 6 {
			if split {
				bo.PutUint64(sub[sl.StartPFN64:], pr.Start)
				bo.PutUint64(sub[sl.EndPFN64:], pr.End)
			}
			bo.PutUint64(sub[sl.MaxMapnr64:], h.MaxMapnr)
		}

		// Pages of this part, data right after their descriptors.
		lo, _ := slices.BinarySearch(k.Pages, pr.Start+pfnOff)
		hi, _ := slices.BinarySearch(k.Pages, pr.End+pfnOff)
		pages := k.Pages[lo:hi]
		dataOff := descOff + int64(len(pages))*kdumpfmt.PageDescSize
		desc := make([]byte, len(pages)*kdumpfmt.PageDescSize)
		shared := map[string]int64{}
		off := dataOff
		for j, pfn := range pages {
			flags, data, err := k.Page(pfn)
			if err != nil {
				return err
			}
			if len(data) > bs {
				return fmt.Errorf("extract: pfn %#x: %d bytes stored in a %d-byte block", pfn, len(data), bs)
			}
			small := len(data) <= kdSmallBlob
			key := ""
			if small {
				key = string(rune(flags)) + string(data)
			}
			at, seen := shared[key]
			if !small || !seen {
				if _, err := w.WriteAt(data, off); err != nil {
					return err
				}
				at = off
				off += int64(len(data))
				if small {
					shared[key] = at
				}
			}
			d := desc[j*kdumpfmt.PageDescSize:]
			bo.PutUint64(d[0:], uint64(at))
			bo.PutUint32(d[8:], uint32(len(data)))
			bo.PutUint32(d[12:], flags)
		}
		for _, c := range []struct {
			b   []byte
			off int64
		}{{hdr, 0}, {sub, subOff}, {bm1, bmOff}, {bm2, bmOff + int64(bmHalf)}, {desc, descOff}} {
			if _, err := w.WriteAt(c.b, c.off); err != nil {
				return err
			}
		}
		if h.Version >= 5 && len(k.EraseInfo) > 0 {
			if _, err := w.WriteAt(k.EraseInfo, off); err != nil {
				return err
			}
			var b [16]byte
			bo.PutUint64(b[0:], uint64(off))
			if sl.Long == 8 {
				bo.PutUint64(b[8:], uint64(len(k.EraseInfo)))
			} else {
				bo.PutUint32(b[8:], uint32(len(k.EraseInfo)))
			}
			if _, err := w.WriteAt(b[:8+sl.Long], subOff+int64(sl.OffEraseinfo)); err != nil {
				return err
			}
		}
	}
	return nil
}

// FlatWriter writes a flattened (makedumpfile -F) stream: every WriteAt
// becomes one record {offset, size, data}, in the order written. Close
// writes the end marker; it does not close the underlying writer.
type FlatWriter struct {
	w       io.Writer
	started bool
	err     error
}

// NewFlatWriter returns a FlatWriter writing to w.
func NewFlatWriter(w io.Writer) *FlatWriter { return &FlatWriter{w: w} }

const (
	flatHeaderSize = 4096
	flatMaxRecord  = 16 << 20
)

func (f *FlatWriter) start() {
	if f.started || f.err != nil {
		return
	}
	f.started = true
	hdr := make([]byte, flatHeaderSize)
	copy(hdr, "makedumpfile")
	binary.BigEndian.PutUint64(hdr[16:], 1) // type: flat header
	binary.BigEndian.PutUint64(hdr[24:], 1) // version
	_, f.err = f.w.Write(hdr)
}

// WriteAt writes p as records for offset off of the rearranged file.
func (f *FlatWriter) WriteAt(p []byte, off int64) (int, error) {
	f.start()
	n := 0
	for f.err == nil && len(p) > 0 {
		c := p[:min(len(p), flatMaxRecord)]
		var rh [16]byte
		binary.BigEndian.PutUint64(rh[0:], uint64(off))
		binary.BigEndian.PutUint64(rh[8:], uint64(len(c)))
		if _, f.err = f.w.Write(rh[:]); f.err == nil {
			_, f.err = f.w.Write(c)
		}
		if f.err == nil {
			n += len(c)
			off += int64(len(c))
			p = p[len(c):]
		}
	}
	return n, f.err
}

// Close writes the end-of-stream record.
func (f *FlatWriter) Close() error {
	f.start()
	if f.err != nil {
		return f.err
	}
	var rh [16]byte
	for i := range rh {
		rh[i] = 0xff
	}
	_, f.err = f.w.Write(rh[:])
	if f.err == nil {
		f.err = errors.New("extract: flattened stream closed")
		return nil
	}
	return f.err
}
