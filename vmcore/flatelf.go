package vmcore

import (
	"bytes"
	"io"
	"os"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
)

// flatELFOpener reads a flattened stream holding an ELF core (what
// makedumpfile -E -F writes), in place, like a flattened kdump file.
var flatELFOpener = opener{
	name: "elf-flattened",
	openPath: func(paths []string) (backend, string, error) {
		return openOwned(paths[0], func(r io.ReaderAt, size int64) (backend, string, error) {
			be, format, err := openFlatELF(r, size)
			if err == nil && len(paths) > 1 {
				be.close()
				return nil, "", errSingleELF(len(paths))
			}
			return be, format, err
		})
	},
	openRA: openFlatELF,
}

func openFlatELF(r io.ReaderAt, size int64) (backend, string, error) {
	var hdr [32]byte
	if n, _ := r.ReadAt(hdr[:], 0); n < len(hdr) || !bytes.HasPrefix(hdr[:], []byte("makedumpfile\x00")) {
		return nil, "", ErrUnrecognizedFormat
	}
	fl, err := diskdump.OpenFlattened(r, size)
	if err != nil {
		return nil, "", kdumpErr(err)
	}
	var magic [4]byte
	if n, _ := fl.ReadAt(magic[:], 0); n < 4 || string(magic[:]) != elfMagic {
		return nil, "", ErrUnrecognizedFormat
	}
	f, err := elfcore.NewFile(fl, fl.Size())
	if err != nil {
		return nil, "", elfErr(err)
	}
	if err := checkLoads(f); err != nil {
		f.Close()
		return nil, "", err
	}
	return &elfBackend{f}, "elf-flattened", nil
}

const elfMagic = "\x7fELF"

// openOwned opens the one file a format is read from and hands it, with
// its size, to open; the backend returned owns the file, closed when open
// fails.
func openOwned(path string, open func(io.ReaderAt, int64) (backend, string, error)) (backend, string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, "", err
	}
	be, format, err := open(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, "", err
	}
	return &ownedBackend{be, fh}, format, nil
}

// ownedBackend closes the file under a backend that does not own it.
type ownedBackend struct {
	backend
	fh *os.File
}

func (b *ownedBackend) close() error {
	err := b.backend.close()
	if cerr := b.fh.Close(); err == nil {
		err = cerr
	}
	return err
}
