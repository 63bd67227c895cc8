package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/snappy"
)

// reencodeSnappy rewrites an uncompressed kdump file (makedumpfile without
// -c/-l/-p/-z) with every page compressed as makedumpfile -p would: a raw
// snappy block (snappy_compress), flag DUMP_DH_COMPRESSED_SNAPPY, stored raw
// when that does not shrink the page. Headers, sub-header, notes and bitmaps
// are copied unchanged except for the status compression bit; descriptors
// that share data (the zero page) keep sharing it. Debian builds
// makedumpfile without snappy, so this is the only way to get a snappy dump
// of a real kernel here.
func reencodeSnappy(in, out string) error {
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	info, err := kdumpInfo(src)
	if err != nil {
		return err
	}
	if info.Split != 0 || info.Codecs["raw"] != int(info.Pages) {
		return fmt.Errorf("%s: want an unsplit kdump file with raw pages only", in)
	}
	h := make([]byte, 464)
	if _, err := src.ReadAt(h, 0); err != nil {
		return err
	}
	bs := int64(info.BlockSize)
	descOff := (1 + int64(le.Uint32(h[432:])) + int64(le.Uint32(h[436:]))) * bs
	sub := make([]byte, 104)
	if _, err := src.ReadAt(sub, bs); err != nil {
		return err
	}
	if le.Uint64(sub[72:]) != 0 {
		return fmt.Errorf("%s: eraseinfo not supported", in)
	}
	n := int64(info.Pages)
	descs := make([]byte, 24*n)
	if _, err := src.ReadAt(descs, descOff); err != nil {
		return err
	}
	tmp := out + ".tmp"
	dst, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	head := make([]byte, descOff)
	if _, err := src.ReadAt(head, 0); err != nil {
		dst.Close()
		return err
	}
	le.PutUint32(head[424:], le.Uint32(head[424:])&^0x27|4)
	if _, err := dst.Write(head); err != nil {
		dst.Close()
		return err
	}
	dataOff := descOff + 24*n
	w := bufio.NewWriterSize(io.NewOffsetWriter(dst, dataOff), 1<<20)
	type placed struct {
		off   int64
		size  uint32
		flags uint32
	}
	done := map[int64]placed{}
	page := make([]byte, bs)
	next := dataOff
	for i := range n {
		d := descs[24*i:]
		so := int64(le.Uint64(d))
		p, ok := done[so]
		if !ok {
			if _, err := src.ReadAt(page, so); err != nil {
				dst.Close()
				return fmt.Errorf("page %d: %w", i, err)
			}
			// makedumpfile stores its shared zero page raw (pd_zero).
			data, flags := page, uint32(0)
			if !allZero(page) {
				if c := snappy.Encode(nil, page); int64(len(c)) < bs {
					if back, err := snappy.Decode(nil, c); err != nil || string(back) != string(page) {
						dst.Close()
						return fmt.Errorf("page %d: snappy round trip failed", i)
					}
					data, flags = c, 4
				}
			}
			if _, err := w.Write(data); err != nil {
				dst.Close()
				return err
			}
			p = placed{next, uint32(len(data)), flags}
			next += int64(len(data))
			done[so] = p
		}
		le.PutUint64(d, uint64(p.off))
		le.PutUint32(d[8:], p.size)
		le.PutUint32(d[12:], p.flags)
	}
	if err := w.Flush(); err != nil {
		dst.Close()
		return err
	}
	if _, err := dst.WriteAt(descs, descOff); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
