package vmcore

import (
	"bytes"
	"fmt"
	"io"
	"os"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Magic bytes of the wrappers we decompress.
var (
	magicXZ   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicGzip = []byte{0x1f, 0x8b}
)

// wrapperOf names the wrapper whose magic starts head, or "".
func wrapperOf(head []byte) string {
	switch {
	case bytes.HasPrefix(head, magicXZ):
		return "xz"
	case bytes.HasPrefix(head, magicZstd):
		return "zstd"
	case bytes.HasPrefix(head, magicGzip):
		return "gzip"
	}
	return ""
}

// unwrap decompresses r into a temporary file when it starts with a
// wrapper's magic. It returns the wrapper's name and the temporary file's
// path ("" for an unwrapped input). The caller removes the file, which may
// exist even when err is not nil.
func unwrap(r io.ReaderAt, size int64, opt Options) (wrapper, tmp string, err error) {
	var head [8]byte
	n, _ := r.ReadAt(head[:], 0)
	wrapper = wrapperOf(head[:n])
	if wrapper == "" {
		return "", "", nil
	}
	src := io.NewSectionReader(r, 0, size)
	var dec io.Reader
	switch wrapper {
	case "xz":
		xr, err := xz.NewReader(src)
		if err != nil {
			return wrapper, "", fmt.Errorf("xz: %w", err)
		}
		dec = xr
	case "zstd":
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return wrapper, "", fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		dec = zr
	case "gzip":
		gr, err := kgzip.NewReader(src)
		if err != nil {
			return wrapper, "", fmt.Errorf("gzip: %w", err)
		}
		defer gr.Close()
		dec = gr
	}
	limit := opt.MaxDecompressedSize
	if limit <= 0 {
		limit = DefaultMaxDecompressedSize
	}
	fh, err := os.CreateTemp(opt.TempDir, "kdump-syms-*.vmcore")
	if err != nil {
		return wrapper, "", err
	}
	tmp = fh.Name()
	written, err := io.Copy(fh, io.LimitReader(dec, limit+1))
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wrapper, tmp, fmt.Errorf("decompressing %s: %w", wrapper, err)
	}
	if written > limit {
		return wrapper, tmp, fmt.Errorf("%s wrapper: more than %d bytes: %w", wrapper, limit, ErrTooLarge)
	}
	// One level only: a wrapper inside a wrapper is not a dump.
	return wrapper, tmp, nil
}
