package vmcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// kdumpOpener reads kdump-compressed files, flattened streams and split
// sets with package diskdump.
var kdumpOpener = opener{
	name: "kdump",
	openPath: func(paths []string) (backend, string, error) {
		for _, p := range paths {
			fh, err := os.Open(p)
			if err != nil {
				return nil, "", err
			}
			ok := diskdump.Probe(fh)
			fh.Close()
			if !ok {
				if len(paths) > 1 {
					return nil, "", fmt.Errorf("%s: not a kdump-compressed file, and only those can be split: %w", p, ErrUnrecognizedFormat)
				}
				return nil, "", ErrUnrecognizedFormat
			}
		}
		d, err := diskdump.Open(paths...)
		if err != nil {
			return nil, "", kdumpErr(err)
		}
		return newKdumpBackend(d, len(paths))
	},
	openRA: func(r io.ReaderAt, size int64) (backend, string, error) {
		if !diskdump.Probe(r) {
			return nil, "", ErrUnrecognizedFormat
		}
		d, err := diskdump.NewDump(io.NewSectionReader(r, 0, size))
		if err != nil {
			return nil, "", kdumpErr(err)
		}
		return newKdumpBackend(d, 1)
	},
}

func kdumpErr(err error) error {
	// Open names the path; vmcore names it once, as for every format.
	if pe, ok := err.(*diskdump.PathError); ok {
		err = pe.Err
	}
	if errors.Is(err, diskdump.ErrUnrecognizedFormat) {
		return fmt.Errorf("%w (%w)", ErrUnrecognizedFormat, err)
	}
	return err
}

type kdumpBackend struct {
	d   *diskdump.Dump
	hdr diskdump.Header
	nts []elfcore.Note
}

func newKdumpBackend(d *diskdump.Dump, nfiles int) (backend, string, error) {
	b := &kdumpBackend{d: d, hdr: d.Header()}
	if blob := d.Notes(); len(blob) > 0 && b.hdr.ByteOrder != nil {
		// Notes before a malformed one are kept; the rest is lost, as
		// for an ELF core.
		b.nts, _ = elfcore.ParseNotes(blob, b.hdr.ByteOrder, 4)
	}
	format := "kdump"
	switch {
	case nfiles > 1 || b.hdr.Split:
		format = "kdump-split"
	case b.hdr.Flattened:
		format = "kdump-flattened"
	}
	return b, format, nil
}

func (b *kdumpBackend) physical() memory.Reader { return b.d }
func (b *kdumpBackend) virtual() memory.Reader  { return nil }
func (b *kdumpBackend) vmcoreinfo() []byte      { return b.d.VMCOREINFO() }
func (b *kdumpBackend) notes() []elfcore.Note   { return b.nts }
func (b *kdumpBackend) pageSize() int           { return b.hdr.BlockSize }
func (b *kdumpBackend) close() error            { return b.d.Close() }

func (b *kdumpBackend) noteOrder() binary.ByteOrder { return b.hdr.ByteOrder }

func (b *kdumpBackend) machine() Arch {
	a := archFromUname(b.hdr.Machine)
	// The header's own byte order is the target's; but "ppc64le" and
	// "ppc64" say it themselves (the kernel's utsname), and QEMU 7.2
	// writes a ppc64le guest's header big-endian.
	if b.hdr.ByteOrder != nil && a.Name != "" && !isPPC64(a.Name) {
		a.ByteOrder = b.hdr.ByteOrder
	}
	return a
}

// physBase is the sub-header's phys_base when makedumpfile wrote it.
// QEMU's is wrong on x86_64 whenever it is not zero (it parses the decimal
// NUMBER(phys_base) as hex, docs/formats.md §3.3); QEMU leaves utsname.release
// empty, which tells the two apart.
func (b *kdumpBackend) physBase() *uint64 {
	if b.hdr.Release == "" {
		return nil
	}
	pb := b.hdr.PhysBase
	return &pb
}

// ranges coalesces the saved page frames into ranges.
func (b *kdumpBackend) ranges(yield func(start, last uint64) bool) {
	bs := uint64(b.hdr.BlockSize)
	if bs == 0 || bs&(bs-1) != 0 {
		return
	}
	shift := uint(bits.TrailingZeros64(bs))
	var start, next uint64
	have := false
	for pfn := range b.d.SavedPFNs() {
		if have && pfn == next {
			next++
			continue
		}
		if have && !yield(start<<shift, next<<shift-1) {
			return
		}
		start, next, have = pfn, pfn+1, true
	}
	if have {
		yield(start<<shift, next<<shift-1)
	}
}
