package vmcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memimage"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// memImageOpener reads LiME and AVML images with package memimage. They
// carry no VMCOREINFO, architecture or page size: Open finds the note in
// memory and the architecture from it (docs/formats.md §3.7).
var memImageOpener = opener{
	name: "memimage",
	openPath: func(paths []string) (backend, string, error) {
		return openOwned(paths[0], func(r io.ReaderAt, size int64) (backend, string, error) {
			if !memimage.Probe(r) {
				return nil, "", ErrUnrecognizedFormat
			}
			if len(paths) > 1 {
				return nil, "", fmt.Errorf("%d files given, but a memory image is a single file: %w", len(paths), ErrSingleFile)
			}
			return openMemImage(r, size)
		})
	},
	openRA: openMemImage,
}

func openMemImage(r io.ReaderAt, size int64) (backend, string, error) {
	f, err := memimage.NewFile(r, size)
	if errors.Is(err, memimage.ErrUnrecognizedFormat) {
		return nil, "", fmt.Errorf("%w (%w)", ErrUnrecognizedFormat, err)
	}
	if err != nil {
		return nil, "", err
	}
	return &memImageBackend{f}, string(f.Format()), nil
}

// openRaw maps a raw image with the caller's layout: a raw image has no
// header to probe.
func openRaw(paths []string, layout []memimage.RawRange) (backend, string, error) {
	if len(paths) > 1 {
		return nil, "", fmt.Errorf("%d files given, but a raw image is a single file: %w", len(paths), ErrSingleFile)
	}
	return openOwned(paths[0], func(r io.ReaderAt, size int64) (backend, string, error) {
		return openRawReader(r, size, layout)
	})
}

func openRawReader(r io.ReaderAt, size int64, layout []memimage.RawRange) (backend, string, error) {
	f, err := memimage.NewRaw(r, size, layout)
	if err != nil {
		return nil, "", err
	}
	return &memImageBackend{f}, string(f.Format()), nil
}

type memImageBackend struct{ f *memimage.File }

func (b *memImageBackend) physical() memory.Reader     { return b.f.Physical() }
func (b *memImageBackend) virtual() memory.Reader      { return nil }
func (b *memImageBackend) vmcoreinfo() []byte          { return nil }
func (b *memImageBackend) notes() []elfcore.Note       { return nil }
func (b *memImageBackend) pageSize() int               { return 0 }
func (b *memImageBackend) physBase() *uint64           { return nil }
func (b *memImageBackend) noteOrder() binary.ByteOrder { return nil }
func (b *memImageBackend) close() error                { return b.f.Close() }

// machine is unknown: no image format records it. (A LiME file's
// headers are in the byte order of the machine that ran the module, but a
// converter may have written them elsewhere, so Open does not take it.)
func (b *memImageBackend) machine() Arch { return Arch{} }

func (b *memImageBackend) ranges(yield func(start, last uint64) bool) {
	for _, r := range b.f.Ranges() {
		if !yield(r.Start, r.Last) {
			return
		}
	}
}
