package vmcore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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

// tempFile is a file a wrapped dump is decompressed into (see newTempFile).
type tempFile struct {
	*os.File
	unnamed bool // O_TMPFILE: no name until linked
}

// discard closes the file and removes it unless it has a name of its own
// now (keep).
func (t *tempFile) discard() {
	t.Close()
	if !t.unnamed {
		os.Remove(t.Name())
	}
}

// unwrapped is the plain dump behind a wrapped file: a path to open it by,
// and the temporary file behind that path when it is not a cache entry.
// Once the path is opened, release closes the temporary file; the dump
// stays readable through the opened file, and a named temporary file is
// left to the Dump to remove at Close.
type unwrapped struct {
	path string
	tmp  *tempFile
}

// unwrap decompresses r when it starts with a wrapper's magic. It returns
// the wrapper's name ("" for an unwrapped input, with a nil *unwrapped).
// With Options.CacheDir the plain dump is looked up in, or added to, the
// cache (see cache.go); otherwise it goes to a temporary file in
// Options.TempDir.
func unwrap(r io.ReaderAt, size int64, opt Options) (wrapper string, u *unwrapped, err error) {
	var head [8]byte
	n, _ := r.ReadAt(head[:], 0)
	wrapper = wrapperOf(head[:n])
	if wrapper == "" {
		return "", nil, nil
	}
	if opt.CacheDir != "" {
		u, err = cached(r, size, wrapper, opt)
		return wrapper, u, err
	}
	tmp, err := newTempFile(opt.TempDir)
	if err != nil {
		return wrapper, nil, err
	}
	if err := decompress(tmp.File, r, size, wrapper, opt); err != nil {
		tmp.discard()
		return wrapper, nil, err
	}
	return wrapper, &unwrapped{path: tmp.path(), tmp: tmp}, nil
}

// decompress writes the content of wrapped r to w, up to
// Options.MaxDecompressedSize. One level only: a wrapper inside a wrapper
// is not a dump.
func decompress(w io.Writer, r io.ReaderAt, size int64, wrapper string, opt Options) error {
	src := io.NewSectionReader(r, 0, size)
	var dec io.Reader
	switch wrapper {
	case "xz":
		xr, err := xz.NewReader(src)
		if err != nil {
			return fmt.Errorf("xz: %w", err)
		}
		dec = xr
	case "zstd":
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		dec = zr
	case "gzip":
		gr, err := kgzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer gr.Close()
		dec = gr
	default:
		return fmt.Errorf("wrapper %q: %w", wrapper, errors.ErrUnsupported)
	}
	limit := opt.MaxDecompressedSize
	if limit <= 0 {
		limit = DefaultMaxDecompressedSize
	}
	written, err := io.Copy(w, io.LimitReader(dec, limit+1))
	if err != nil {
		return fmt.Errorf("decompressing %s: %w", wrapper, err)
	}
	if written > limit {
		return fmt.Errorf("%s wrapper: more than %d bytes: %w", wrapper, limit, ErrTooLarge)
	}
	return nil
}

// contentKey is the hex SHA-256 of r's size bytes: a cache entry is found
// by what the wrapped file holds, never by its name or time.
func contentKey(r io.ReaderAt, size int64) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
