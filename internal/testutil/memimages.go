package testutil

// Writers of the memory image formats package memimage reads (LiME, AVML,
// raw), for building test images from any memory: a synthetic one, or a
// corpus dump's physical memory (ConvertImages).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/snappy"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// PhysRange is a physical range, Last inclusive.
type PhysRange struct{ Start, Last uint64 }

// imageCopyChunk is how much memory the writers copy at a time.
const imageCopyChunk = 1 << 20

// WriteLiME writes the ranges of src as a LiME file (format "lime"), its
// headers in byte order bo, as LiME's module does on a machine of that
// byte order.
func WriteLiME(w io.Writer, src memory.Reader, ranges []PhysRange, bo binary.ByteOrder) error {
	for _, r := range ranges {
		if _, err := w.Write(LiMEHeader(bo, 0x4C694D45, 1, r.Start, r.Last)); err != nil {
			return err
		}
		if err := copyMemory(w, src, r); err != nil {
			return err
		}
	}
	return nil
}

// LiMEHeader returns a 32-byte LiME/AVML range header.
func LiMEHeader(bo binary.ByteOrder, magic, version uint32, start, last uint64) []byte {
	h := make([]byte, 32)
	bo.PutUint32(h[0:], magic)
	bo.PutUint32(h[4:], version)
	bo.PutUint64(h[8:], start)
	bo.PutUint64(h[16:], last)
	return h
}

// AVMLBlockSize is the most AVML puts in one block (its MAX_BLOCK_SIZE).
const AVMLBlockSize = 16 << 20

// WriteAVML writes the ranges of src as AVML writes its compressed images
// (src/image.rs): each range cut into blocks of at most AVMLBlockSize, a
// block that is all zeros left out, each block a header with magic "AVML"
// and version 2, a snappy framing-format stream and the stream's length as
// a little-endian u64.
func WriteAVML(w io.Writer, src memory.Reader, ranges []PhysRange) error {
	for _, r := range ranges {
		for start := r.Start; ; start += AVMLBlockSize {
			last := min(r.Last, start+AVMLBlockSize-1)
			data := make([]byte, last-start+1)
			if err := memory.ReadFull(src, data, start); err != nil {
				return err
			}
			if bytes.Count(data, []byte{0}) != len(data) {
				block, err := AVMLBlock(start, last, data)
				if err != nil {
					return err
				}
				if _, err := w.Write(block); err != nil {
					return err
				}
			}
			if last == r.Last {
				break
			}
		}
	}
	return nil
}

// AVMLBlock returns one AVML block: header, snappy stream of data, trailer.
func AVMLBlock(start, last uint64, data []byte) ([]byte, error) {
	var stream bytes.Buffer
	sw := snappy.NewBufferedWriter(&stream)
	if _, err := sw.Write(data); err != nil {
		return nil, err
	}
	if err := sw.Close(); err != nil {
		return nil, err
	}
	out := LiMEHeader(binary.LittleEndian, 0x4C4D5641, 2, start, last)
	out = append(out, stream.Bytes()...)
	return binary.LittleEndian.AppendUint64(out, uint64(stream.Len())), nil
}

// WriteRaw writes a raw image of src from physical base to last, inclusive,
// into f: the bytes of each range at its offset from base, the rest left
// as holes of the (sparse) file, reading as zeros.
func WriteRaw(f *os.File, src memory.Reader, ranges []PhysRange, base, last uint64) error {
	if err := f.Truncate(int64(last - base + 1)); err != nil {
		return err
	}
	for _, r := range ranges {
		if r.Start < base || r.Last > last {
			return fmt.Errorf("testutil: range [%#x-%#x] outside the raw image [%#x-%#x]", r.Start, r.Last, base, last)
		}
		if err := copyMemory(io.NewOffsetWriter(f, int64(r.Start-base)), src, r); err != nil {
			return err
		}
	}
	return nil
}

func copyMemory(w io.Writer, src memory.Reader, r PhysRange) error {
	buf := make([]byte, imageCopyChunk)
	for a := r.Start; ; {
		n := min(uint64(len(buf)), r.Last-a+1)
		if err := memory.ReadFull(src, buf[:n], a); err != nil {
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		if a+n-1 == r.Last {
			return nil
		}
		a += n
	}
}

// Images are the memory images ConvertImages writes.
type Images struct {
	LiME, AVML, Raw string // paths
	// RawLayout is the raw image's layout as kdump-syms --raw takes it:
	// its base, "0x40000000".
	RawLayout string
}

// rawGapLimit ends a raw image at the first gap between saved ranges this
// large: x86 QEMU dumps hold the BIOS ROM just below 4 GiB, which would make
// a raw image of a 256 MiB guest 4 GiB long.
const rawGapLimit = 1 << 30

// ConvertImages converts the ELF core at elfPath (a corpus QEMU ELF dump,
// or its committed extract) into a LiME file (little-endian headers), an
// AVML image and a raw image in dir: the same physical memory, every
// PT_LOAD range of it (the raw image from the range's 1 GiB-aligned base
// up to the first gap of rawGapLimit, holes as zeros, sparse on disk).
func ConvertImages(elfPath, dir string) (Images, error) {
	return ConvertImagesZeroed(elfPath, dir, nil)
}

// ConvertImagesZeroed is ConvertImages with the physical ranges in zero
// written as zeros: an image without the VMCOREINFO note, say.
func ConvertImagesZeroed(elfPath, dir string, zero []PhysRange) (Images, error) {
	return ConvertImagesOnly(elfPath, dir, zero, AllImages)
}

// ImageFormat is a set of the formats ConvertImagesOnly writes.
type ImageFormat uint8

// The memory image formats.
const (
	LiMEImage ImageFormat = 1 << iota
	AVMLImage
	RawImage
	AllImages = LiMEImage | AVMLImage | RawImage
)

// ConvertImagesOnly is ConvertImagesZeroed writing only the images in
// which (each is the dump's memory once more, the AVML one compressed);
// the paths of the others are "".
func ConvertImagesOnly(elfPath, dir string, zero []PhysRange, which ImageFormat) (Images, error) {
	f, err := elfcore.Open(elfPath)
	if err != nil {
		return Images{}, err
	}
	defer f.Close()
	var rs []PhysRange
	for _, r := range f.PhysicalRanges() {
		rs = append(rs, PhysRange{r.Start, r.Last})
	}
	if len(rs) == 0 {
		return Images{}, fmt.Errorf("testutil: %s: no physical ranges", elfPath)
	}
	im := Images{LiME: filepath.Join(dir, "image.lime"), AVML: filepath.Join(dir, "image.avml"), Raw: filepath.Join(dir, "image.raw")}
	var phys memory.Reader = f.Physical()
	if len(zero) > 0 {
		phys = zeroedReader{phys, zero}
	}
	write := func(path string, w func(*os.File) error) error {
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		err = w(fh)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if which&LiMEImage == 0 {
		im.LiME = ""
	} else if err := write(im.LiME, func(fh *os.File) error {
		bw := bufio.NewWriterSize(fh, imageCopyChunk)
		if err := WriteLiME(bw, phys, rs, binary.LittleEndian); err != nil {
			return err
		}
		return bw.Flush()
	}); err != nil {
		return Images{}, err
	}
	if which&AVMLImage == 0 {
		im.AVML = ""
	} else if err := write(im.AVML, func(fh *os.File) error {
		bw := bufio.NewWriterSize(fh, imageCopyChunk)
		if err := WriteAVML(bw, phys, rs); err != nil {
			return err
		}
		return bw.Flush()
	}); err != nil {
		return Images{}, err
	}
	if which&RawImage == 0 {
		im.Raw = ""
		return im, nil
	}
	base := rs[0].Start &^ (rawGapLimit - 1)
	n := 1
	for n < len(rs) && rs[n].Start-rs[n-1].Last <= rawGapLimit {
		n++
	}
	if err := write(im.Raw, func(fh *os.File) error {
		return WriteRaw(fh, phys, rs[:n], base, rs[n-1].Last)
	}); err != nil {
		return Images{}, err
	}
	im.RawLayout = fmt.Sprintf("%#x", base)
	return im, nil
}

// zeroedReader reads r with the ranges in zero as zeros.
type zeroedReader struct {
	r    memory.Reader
	zero []PhysRange
}

func (z zeroedReader) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := z.r.ReadAt(p, addr)
	if n == 0 {
		return n, err
	}
	last := addr + uint64(n) - 1
	for _, r := range z.zero {
		lo, hi := max(addr, r.Start), min(last, r.Last)
		if lo <= hi {
			clear(p[lo-addr : hi-addr+1])
		}
	}
	return n, err
}
