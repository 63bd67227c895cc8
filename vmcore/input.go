package vmcore

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/kdumpsyms/kdumpsyms/memimage"
)

// Stdin is the name that reads a dump from standard input.
const Stdin = "-"

// ErrNotSeekable means the input is a pipe, a FIFO or standard input, and
// Options.NoSpool forbids copying it to a temporary file: every format
// but a flattened stream needs random access.
var ErrNotSeekable = errors.New("needs a seekable file")

// DirectoryError reports a directory given as the dump. Dumps lists the
// files in it that start like a dump this package reads, by name.
type DirectoryError struct {
	Path  string
	Dumps []string
}

func (e *DirectoryError) Error() string {
	switch len(e.Dumps) {
	case 0:
		return e.Path + " is a directory, with no dump file in it"
	case 1:
		return fmt.Sprintf("%s is a directory; the dump in it is %s", e.Path, filepath.Join(e.Path, e.Dumps[0]))
	}
	names := strings.Join(e.Dumps, ", ")
	if len(e.Dumps) > maxNamedDumps {
		names = fmt.Sprintf("%s and %d more", strings.Join(e.Dumps[:maxNamedDumps], ", "), len(e.Dumps)-maxNamedDumps)
	}
	return fmt.Sprintf("%s is a directory; the dumps in it: %s (name one)", e.Path, names)
}

// maxNamedDumps is how many of a directory's dumps its error names, so that
// the message stays one line.
const maxNamedDumps = 8

// maxDirEntries bounds how many entries of a directory given as the dump
// are looked at.
const maxDirEntries = 1000

// prepareInput turns one named input into a path Open can read at
// random: regular files and block devices as they are; standard input
// ("-"), pipes and FIFOs copied to a temporary file (tmp, which the caller
// removes), which never waits for a writer that does not exist. A
// directory, a character device or a socket is an error saying what it
// is.
func prepareInput(name string, opt Options) (path, tmp string, err error) {
	var fh *os.File
	if name == Stdin {
		fh = os.Stdin
		st, err := fh.Stat()
		if err != nil {
			return "", "", err
		}
		if st.Mode()&fs.ModeCharDevice != 0 {
			return "", "", fmt.Errorf("standard input is a terminal, not a dump (pipe one in, or name the file)")
		}
		if st.Mode().IsRegular() {
			// "< vmcore": the file itself, read in place.
			return "/dev/stdin", "", nil
		}
		return spool(fh, "standard input", opt)
	}
	st, err := os.Stat(name)
	if err != nil {
		return "", "", err
	}
	m := st.Mode()
	switch {
	case m.IsRegular():
		return name, "", nil
	case m.IsDir():
		return "", "", &DirectoryError{Path: name, Dumps: dumpsIn(name)}
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
		return name, "", nil // a block device holding a dump
	case m&fs.ModeCharDevice != 0:
		return "", "", fmt.Errorf("%s is a character device, not a dump file: %w", name, errors.ErrUnsupported)
	case m&fs.ModeNamedPipe != 0:
		// Opening a FIFO for reading waits for a writer; non-blocking, it
		// does not, and a FIFO nobody writes to reads as empty.
		fh, err := openNonblock(name)
		if err != nil {
			return "", "", err
		}
		defer fh.Close()
		return spool(&fifoReader{f: fh, wait: fifoWriterWait}, name, opt)
	}
	return "", "", fmt.Errorf("%s is a %v, not a dump file: %w", name, m.Type(), errors.ErrUnsupported)
}

// fifoWriterWait is how long a FIFO opened before its writer is given for
// the writer to appear: long enough for a producer started in the same
// shell line, short enough that a FIFO nobody writes to fails promptly.
const fifoWriterWait = 5 * time.Second

// fifoReader reads a FIFO opened without waiting for a writer: until the
// first byte arrives, end of file means no writer yet, and is retried
// for up to wait.
type fifoReader struct {
	f       *os.File
	wait    time.Duration
	started time.Time
	got     bool
}

func (r *fifoReader) Read(p []byte) (int, error) {
	if r.started.IsZero() {
		r.started = time.Now()
	}
	for {
		n, err := r.f.Read(p)
		if n > 0 {
			r.got = true
		}
		if err != io.EOF || r.got {
			return n, err
		}
		if time.Since(r.started) >= r.wait {
			return 0, fmt.Errorf("no process wrote to it within %v", r.wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spool copies a stream to a temporary file, up to
// Options.MaxDecompressedSize.
func spool(r io.Reader, what string, opt Options) (path, tmp string, err error) {
	if opt.NoSpool {
		return "", "", fmt.Errorf("%s is a pipe: %w (spooling to a temporary file is off)", what, ErrNotSeekable)
	}
	limit := opt.MaxDecompressedSize
	if limit <= 0 {
		limit = DefaultMaxDecompressedSize
	}
	fh, err := os.CreateTemp(opt.TempDir, "kdump-syms-*.spool")
	if err != nil {
		return "", "", err
	}
	n, err := io.Copy(fh, io.LimitReader(r, limit+1))
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w", what, err)
	case n > limit:
		err = fmt.Errorf("%s: more than %d bytes: %w", what, limit, ErrTooLarge)
	case n == 0:
		err = fmt.Errorf("%s is empty: %w", what, ErrUnrecognizedFormat)
	}
	if err != nil {
		os.Remove(fh.Name())
		return "", "", err
	}
	return fh.Name(), fh.Name(), nil
}

// dumpsIn names the regular files of dir that start like a dump this
// package opens: an ELF core (an executable or a library is not one), a
// kdump-compressed file, a flattened stream, a LiME or AVML image, or one
// of them wrapped in xz, zstd or gzip. The start of a gzip or zstd file's
// content is looked at too (a .tar.gz or a gzipped profile is no dump);
// an xz file is taken for a dump by its magic alone: decompressing even
// its first bytes allocates the dictionary its header asks for, up to
// 4 GiB.
func dumpsIn(dir string) []string {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	ents, _ := d.ReadDir(maxDirEntries)
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fh, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var head [dumpHeadLen]byte
		n, _ := io.ReadFull(fh, head[:])
		ok := startsLikeDump(head[:n])
		switch w := wrapperOf(head[:n]); w {
		case "":
		case "xz":
			ok = true
		default:
			inner, err := wrappedHead(fh, w)
			ok = err == nil && startsLikeDump(inner)
		}
		fh.Close()
		if ok {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// dumpHeadLen is how many bytes of a file startsLikeDump looks at, and
// peekMaxWindow the largest zstd window wrappedHead allocates.
const (
	dumpHeadLen   = 64
	peekMaxWindow = 8 << 20
)

// startsLikeDump reports whether head, the first bytes of a file, is the
// start of a dump this package opens unwrapped.
func startsLikeDump(head []byte) bool {
	s := string(head)
	if len(s) >= 18 && s[:4] == "\x7fELF" {
		// e_type, in the byte order EI_DATA gives: ET_CORE.
		bo := binary.ByteOrder(binary.LittleEndian)
		if s[5] == 2 {
			bo = binary.BigEndian
		}
		return bo.Uint16(head[16:]) == uint16(elf.ET_CORE)
	}
	for _, magic := range []string{"KDUMP   ", "DISKDUMP", "makedumpfile\x00"} {
		if len(s) >= len(magic) && s[:len(magic)] == magic {
			return true
		}
	}
	return memimage.Probe(bytes.NewReader(head))
}

// wrappedHead decompresses the first dumpHeadLen bytes of the content of
// fh, wrapped in w (gzip or zstd). A zstd frame asking for a window over
// peekMaxWindow is an error here: the peek does not allocate it.
func wrappedHead(fh *os.File, w string) ([]byte, error) {
	src := bufio.NewReader(io.NewSectionReader(fh, 0, 1<<62))
	var dec io.Reader
	switch w {
	case "zstd":
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(peekMaxWindow), zstd.WithDecoderMaxMemory(peekMaxWindow))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		dec = zr
	default:
		d, done, err := newDecoder(src, w)
		if err != nil {
			return nil, err
		}
		defer done()
		dec = d
	}
	head := make([]byte, dumpHeadLen)
	n, err := io.ReadFull(dec, head)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return head[:n], err
}
