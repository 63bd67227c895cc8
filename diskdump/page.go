package diskdump

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	lzo "github.com/anchore/go-lzo"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// cacheEntries is how many decompressed pages a Dump keeps: enough for the
// working set of a page-table walk plus the tables being decoded.
const cacheEntries = 64

// pageCache is a small CLOCK cache of decompressed pages keyed by pfn.
// Page buffers are allocated on first use of a slot and reused after.
type pageCache struct {
	bs   int
	pfn  [cacheEntries]uint64
	used [cacheEntries]bool
	ref  [cacheEntries]bool
	buf  [cacheEntries][]byte
	idx  map[uint64]int
	hand int
	last int // slot of the last hit or fill, -1 if none
}

func (c *pageCache) init(bs int) {
	c.bs = bs
	c.idx = make(map[uint64]int, cacheEntries)
	c.last = -1
}

func (c *pageCache) get(pfn uint64) ([]byte, bool) {
	if c.last >= 0 && c.pfn[c.last] == pfn && c.used[c.last] {
		return c.buf[c.last], true
	}
	i, ok := c.idx[pfn]
	if !ok {
		return nil, false
	}
	c.ref[i] = true
	c.last = i
	return c.buf[i], true
}

// slot returns a buffer for pfn, evicting an entry if needed.
func (c *pageCache) slot(pfn uint64) []byte {
	for {
		i := c.hand
		c.hand = (c.hand + 1) % cacheEntries
		if c.used[i] && c.ref[i] {
			c.ref[i] = false
			continue
		}
		if c.used[i] {
			delete(c.idx, c.pfn[i])
		}
		if c.buf[i] == nil {
			c.buf[i] = make([]byte, c.bs)
		}
		c.pfn[i], c.used[i], c.ref[i] = pfn, true, true
		c.idx[pfn] = i
		c.last = i
		return c.buf[i]
	}
}

func (c *pageCache) drop(pfn uint64) {
	if i, ok := c.idx[pfn]; ok {
		delete(c.idx, pfn)
		c.used[i], c.ref[i] = false, false
		if c.last == i {
			c.last = -1
		}
	}
}

// decoders holds one decoder per codec, created on first use and reused,
// and a buffer for compressed page data.
type decoders struct {
	src  []byte
	br   bytes.Reader
	zr   io.ReadCloser
	zstd *zstd.Decoder
	one  [1]byte
}

// codecName names the codec of descriptor flags.
func codecName(flags uint32) string {
	switch {
	case flags == 0:
		return "raw"
	case flags&StatusZlib != 0:
		return "zlib"
	case flags&StatusLZO != 0:
		return "lzo"
	case flags&StatusSnappy != 0:
		return "snappy"
	case flags&StatusZstd != 0:
		return "zstd"
	}
	return "unknown"
}

// load reads the page described by pd from r and decodes it into dst,
// which is exactly one block long.
func (dc *decoders) load(dst []byte, r io.ReaderAt, pd pageDesc, pfn uint64) error {
	if err := checkDesc(pd, len(dst), pfn); err != nil {
		return err
	}
	if pd.flags&pageCompressed == 0 {
		if _, err := r.ReadAt(dst[:len(dst):len(dst)], pd.off); err != nil {
			return dataErr(pfn, pd, err)
		}
		return nil
	}
	if cap(dc.src) < len(dst) {
		dc.src = make([]byte, len(dst))
	}
	src := dc.src[:pd.size]
	if _, err := r.ReadAt(src, pd.off); err != nil {
		return dataErr(pfn, pd, err)
	}
	return dc.decodeFrom(dst, src, pd, pfn)
}

// checkDesc checks what a descriptor says of a page before its data is
// read: known flags, and a raw page exactly one block of bs bytes long.
func checkDesc(pd pageDesc, bs int, pfn uint64) error {
	if pd.flags&pageCompressed == 0 {
		if pd.flags != 0 {
			return formatErr(pd.off, uint64(pd.flags), "page data for pfn %#x: unknown compression flags", pfn)
		}
		if pd.size != int64(bs) {
			return formatErr(pd.off, uint64(pd.size), "raw page data for pfn %#x is not one block long", pfn)
		}
	}
	return nil
}

// decodeFrom decodes src, the data read for the compressed page pd, into
// dst, which is exactly one block long. (Raw pages are read straight into
// their place.)
func (dc *decoders) decodeFrom(dst, src []byte, pd pageDesc, pfn uint64) error {
	// A decoder may write up to dst's capacity (zstd's DecodeAll does);
	// past the block is someone else's memory (the next page of a read).
	dst = dst[:len(dst):len(dst)]
	bs := len(dst)
	n, err := dc.decode(dst, src, pd.flags)
	if err == nil && n != bs {
		err = fmt.Errorf("decompressed to %d bytes, want %d", n, bs)
	}
	if err != nil {
		return formatErr(pd.off, pfn, "%s page data for pfn %#x (%d bytes): %v", codecName(pd.flags), pfn, pd.size, err)
	}
	return nil
}

func (dc *decoders) decode(dst, src []byte, flags uint32) (int, error) {
	switch {
	case flags&StatusZlib != 0:
		dc.br.Reset(src)
		if dc.zr == nil {
			zr, err := zlib.NewReader(&dc.br)
			if err != nil {
				return 0, err
			}
			dc.zr = zr
		} else if err := dc.zr.(zlib.Resetter).Reset(&dc.br, nil); err != nil {
			return 0, err
		}
		n, err := io.ReadFull(dc.zr, dst)
		if err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return n, nil // short page: reported by the caller
			}
			return n, err
		}
		// The stream must end here, with a valid checksum.
		if m, err := dc.zr.Read(dc.one[:]); m != 0 {
			return len(dst) + m, nil
		} else if err != io.EOF {
			if err == nil {
				err = errors.New("zlib stream does not end after one page")
			}
			return n, err
		}
		return n, nil
	case flags&StatusLZO != 0:
		return lzo.Decompress(src, dst)
	case flags&StatusSnappy != 0:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return 0, err
		}
		if n != len(dst) {
			return n, nil
		}
		out, err := snappy.Decode(dst, src)
		return len(out), err
	default: // zstd
		if dc.zstd == nil {
			z, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecodeAllCapLimit(true),
				zstd.WithDecoderMaxWindow(zstdMaxWindow),
				zstd.WithDecoderMaxMemory(zstdMaxWindow))
			if err != nil {
				return 0, err
			}
			dc.zstd = z
		}
		out, err := dc.zstd.DecodeAll(src, dst[:0])
		if err != nil {
			return 0, err
		}
		if len(out) > 0 && &out[0] != &dst[0] {
			return 0, errors.New("zstd page larger than a block")
		}
		return len(out), nil
	}
}

// zstdMaxWindow bounds the zstd window a page frame may declare: a frame
// for one page needs no more than the page, and makedumpfile writes
// single-segment frames.
const zstdMaxWindow = 8 << 20

func dataErr(pfn uint64, pd pageDesc, err error) error {
	if err == io.EOF {
		return formatErr(pd.off, pfn, "page data for pfn %#x truncated", pfn)
	}
	return fmt.Errorf("diskdump: page data for pfn %#x at %#x: %w", pfn, pd.off, err)
}
