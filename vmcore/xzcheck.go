package vmcore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// maxXZDict caps the LZMA2 dictionary an xz-wrapped dump may ask for.
// ulikunitz/xz allocates each block's dictionary whole before decoding it,
// the larger of the block header's size and the caller's, up to 4 GiB:
// a size we have not checked. xz -9 uses 64 MiB.
const maxXZDict = 256 << 20

// maxXZBlocks bounds the blocks checkXZDicts looks at, so that an index
// claiming millions of tiny blocks ends; xz -T0 of a 64 GiB dump at -9
// makes about 350.
const maxXZBlocks = 1 << 20

// xzFooter and xzHeader are the sizes of an xz stream's footer and header.
const (
	xzHeader = 12
	xzFooter = 12
)

// checkXZDicts walks the streams of the xz file r of size bytes from its
// end (footer, index, then each block header) and returns an error naming
// the file offset of the first block whose LZMA2 dictionary exceeds
// maxXZDict (matching ErrTooLarge), or of a structure that does not parse
// (matching memory.ErrCorrupt). It reads the index and the block headers
// only, not the compressed data.
func checkXZDicts(r io.ReaderAt, size int64) error {
	end := size
	blocks := 0
	for end > 0 {
		// Stream padding: zero words between and after streams.
		var w [4]byte
		for end >= 4 {
			if _, err := r.ReadAt(w[:], end-4); err != nil {
				return xzErr(end-4, "reading: %v", err)
			}
			if w != [4]byte{} {
				break
			}
			end -= 4
		}
		if end < xzHeader+xzFooter {
			return xzErr(end, "%d bytes left, too few for a stream", end)
		}
		var f [xzFooter]byte
		if _, err := r.ReadAt(f[:], end-xzFooter); err != nil {
			return xzErr(end-xzFooter, "reading the stream footer: %v", err)
		}
		if f[10] != 'Y' || f[11] != 'Z' {
			return xzErr(end-2, "no stream footer magic")
		}
		backward := (int64(binary.LittleEndian.Uint32(f[4:])) + 1) * 4
		index := end - xzFooter - backward
		if index < xzHeader {
			return xzErr(end-xzFooter+4, "index of %d bytes before the stream", backward)
		}
		// The index: 0x00, the record count, then per block its unpadded
		// and uncompressed sizes.
		ir := bufio.NewReader(io.NewSectionReader(r, index, backward))
		if b, err := ir.ReadByte(); err != nil || b != 0 {
			return xzErr(index, "no index indicator")
		}
		n, err := readVarint(ir)
		if err != nil {
			return xzErr(index+1, "index record count: %v", err)
		}
		if n > uint64(backward/2) || blocks+int(n) > maxXZBlocks {
			return xzErr(index+1, "index of %d bytes claims %d blocks", backward, n)
		}
		var total int64
		padded := make([]int64, 0, n)
		for i := range n {
			unpadded, err1 := readVarint(ir)
			_, err2 := readVarint(ir)
			if err := errors.Join(err1, err2); err != nil {
				return xzErr(index, "index record %d: %v", i, err)
			}
			p := int64((unpadded + 3) &^ 3)
			if unpadded == 0 || p <= 0 || p > index {
				return xzErr(index, "index record %d: block of %d bytes", i, unpadded)
			}
			padded = append(padded, p)
			total += p
			if total > index {
				return xzErr(index, "blocks of %d bytes before an index at %#x", total, index)
			}
		}
		start := index - total - xzHeader
		if start < 0 {
			return xzErr(index, "blocks of %d bytes before an index at %#x", total, index)
		}
		var h [6]byte
		if _, err := r.ReadAt(h[:], start); err != nil || string(h[:]) != "\xfd7zXZ\x00" {
			return xzErr(start, "no stream header where the index puts it")
		}
		at := start + xzHeader
		for _, p := range padded {
			if err := checkXZBlock(r, at); err != nil {
				return err
			}
			at += p
		}
		blocks += int(n)
		end = start
	}
	return nil
}

// checkXZBlock parses the block header at off and checks its LZMA2
// filter's dictionary size.
func checkXZBlock(r io.ReaderAt, off int64) error {
	var b [1]byte
	if _, err := r.ReadAt(b[:], off); err != nil {
		return xzErr(off, "reading a block header: %v", err)
	}
	if b[0] == 0 {
		return xzErr(off, "an index where the index puts a block")
	}
	hdr := make([]byte, (int(b[0])+1)*4) // at most 1 KiB
	if _, err := r.ReadAt(hdr, off); err != nil {
		return xzErr(off, "reading a block header of %d bytes: %v", len(hdr), err)
	}
	br := bufio.NewReader(bytes.NewReader(hdr[2:]))
	flags := hdr[1]
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} {
		if present {
			if _, err := readVarint(br); err != nil {
				return xzErr(off, "block header sizes: %v", err)
			}
		}
	}
	for i := 0; i <= int(flags&3); i++ {
		id, err1 := readVarint(br)
		n, err2 := readVarint(br)
		if err := errors.Join(err1, err2); err != nil || n > uint64(len(hdr)) {
			return xzErr(off, "block header filter %d: malformed", i)
		}
		props := make([]byte, n)
		if _, err := io.ReadFull(br, props); err != nil {
			return xzErr(off, "block header filter %d: properties cut short", i)
		}
		if id != 0x21 {
			continue // not LZMA2: no dictionary
		}
		if n != 1 || props[0]&0x3f > 40 {
			return xzErr(off, "LZMA2 properties % x", props)
		}
		code := uint64(props[0] & 0x3f)
		dict := uint64(1<<32 - 1)
		if code < 40 {
			dict = (2 | code&1) << (code/2 + 11)
		}
		if dict > maxXZDict {
			return fmt.Errorf("xz: block at offset %#x asks for a %d MiB LZMA2 dictionary, over the %d MiB this reader allocates (decompress it with xz first): %w",
				off, dict>>20, maxXZDict>>20, ErrTooLarge)
		}
	}
	return nil
}

// readVarint reads an xz multibyte integer: 7 bits a byte, low first, at
// most 9 bytes.
func readVarint(br io.ByteReader) (uint64, error) {
	var v uint64
	for i := range 9 {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			if i > 0 && b == 0 {
				return 0, errors.New("non-minimal integer")
			}
			return v, nil
		}
	}
	return 0, errors.New("integer longer than 9 bytes")
}

func xzErr(off int64, format string, args ...any) error {
	return fmt.Errorf("xz: at offset %#x: %s: %w", off, fmt.Sprintf(format, args...), memory.ErrCorrupt)
}
