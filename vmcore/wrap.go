package vmcore

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

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
	// added: this open decompressed the dump into the cache (Options.CacheDir).
	added bool
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
	// Buffered: the xz decoder reads its input a byte at a time, one
	// pread each on a bare file (60% of the decompression time in
	// syscalls).
	if wrapper == "xz" {
		// Its block headers say how large a dictionary the decoder will
		// allocate for each block: checked before any is.
		if err := checkXZDicts(r, size); err != nil {
			return err
		}
	}
	src := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 256<<10)
	dec, done, err := newDecoder(src, wrapper)
	if err != nil {
		return err
	}
	defer done()
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

// newDecoder returns a reader of what src holds wrapped in wrapper, and
// what to call when done with it.
func newDecoder(src io.Reader, wrapper string) (io.Reader, func(), error) {
	switch wrapper {
	case "xz":
		xr, err := xz.NewReader(src)
		if err != nil {
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		return xr, func() {}, nil
	case "zstd":
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	case "gzip":
		gr, err := kgzip.NewReader(src)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return gr, func() { gr.Close() }, nil
	}
	return nil, nil, fmt.Errorf("wrapper %q: %w", wrapper, errors.ErrUnsupported)
}

// contentKey names a cache entry by what the wrapped file holds, never by
// its name or time: the hex SHA-256 of its size and of the SHA-256 of each
// keyChunk of its content in order. The chunks are hashed on up to
// GOMAXPROCS goroutines (at most 4), so that a second run's key costs a
// fraction of reading the file: 21.5 MB hash in about 15 ms on one core
// with SHA-NI.
func contentKey(r io.ReaderAt, size int64) (string, error) {
	n := int((size + keyChunk - 1) / keyChunk)
	sums := make([][sha256.Size]byte, n)
	errs := make([]error, n)
	workers := min(runtime.GOMAXPROCS(0), 4, max(n, 1))
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range workers {
		wg.Go(func() {
			h := sha256.New()
			buf := make([]byte, 1<<20)
			for i := range next {
				h.Reset()
				off := int64(i) * keyChunk
				_, err := io.CopyBuffer(h, io.NewSectionReader(r, off, min(keyChunk, size-off)), buf)
				errs[i] = err
				h.Sum(sums[i][:0])
			}
		})
	}
	wg.Wait()
	top := sha256.New()
	var sz [8]byte
	binary.LittleEndian.PutUint64(sz[:], uint64(size))
	top.Write(sz[:])
	for i := range n {
		if errs[i] != nil {
			return "", errs[i]
		}
		top.Write(sums[i][:])
	}
	return hex.EncodeToString(top.Sum(nil)), nil
}

// keyChunk is the unit contentKey hashes on its own.
const keyChunk = 4 << 20
