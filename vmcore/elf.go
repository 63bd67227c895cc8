package vmcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

var elfOpener = opener{
	name: "elf",
	openPath: func(paths []string) (backend, string, error) {
		f, err := elfcore.Open(paths[0])
		if err != nil {
			return nil, "", elfErr(err)
		}
		if len(paths) > 1 {
			f.Close()
			return nil, "", errSingleELF(len(paths))
		}
		if err := checkLoads(f); err != nil {
			f.Close()
			return nil, "", err
		}
		return &elfBackend{f}, "elf", nil
	},
	openRA: func(r io.ReaderAt, size int64) (backend, string, error) {
		f, err := elfcore.NewFile(r, size)
		if err != nil {
			return nil, "", elfErr(err)
		}
		if err := checkLoads(f); err != nil {
			f.Close()
			return nil, "", err
		}
		return &elfBackend{f}, "elf", nil
	},
}

func errSingleELF(n int) error {
	return fmt.Errorf("%d files given, but an ELF core is a single file: %w", n, ErrSingleFile)
}

// checkLoads refuses an ELF core without a PT_LOAD segment: it holds no
// memory this package can read (a Xen xc_core file, for one, keeps its
// pages in sections), so opening it as an empty dump would only fail
// later, and less clearly.
func checkLoads(f *elfcore.File) error {
	if len(f.Segments()) == 0 {
		return fmt.Errorf("ELF core without a PT_LOAD segment (a Xen xc_core file?): its memory is not where this reader looks: %w", errors.ErrUnsupported)
	}
	return nil
}

func elfErr(err error) error {
	if errors.Is(err, elfcore.ErrUnrecognizedFormat) {
		return fmt.Errorf("%w (%w)", ErrUnrecognizedFormat, err)
	}
	return err
}

type elfBackend struct{ f *elfcore.File }

func (b *elfBackend) physical() memory.Reader { return b.f.Physical() }

func (b *elfBackend) virtual() memory.Reader {
	v, ok := b.f.Virtual()
	if !ok {
		return nil
	}
	return v
}

func (b *elfBackend) vmcoreinfo() []byte          { return b.f.VMCOREINFO() }
func (b *elfBackend) notes() []elfcore.Note       { return b.f.Notes() }
func (b *elfBackend) pageSize() int               { return 0 }
func (b *elfBackend) close() error                { return b.f.Close() }
func (b *elfBackend) machine() Arch               { return archFromELF(b.f.Machine(), b.f.ByteOrder(), b.f.Class()) }
func (b *elfBackend) noteOrder() binary.ByteOrder { return b.f.ByteOrder() }

// physBase derives x86_64's phys_base from a kernel-text segment, as
// makedumpfile does (docs/formats.md §3.5): the PT_LOAD whose p_vaddr lies in
// the kernel text mapping starting at __START_KERNEL_map maps it to
// p_paddr, so phys_base = p_paddr − (p_vaddr − __START_KERNEL_map).
func (b *elfBackend) physBase() *uint64 {
	const startKernelMap = 0xffffffff80000000
	if b.machine().Name != "x86_64" {
		return nil
	}
	for _, s := range b.f.Segments() {
		if s.Vaddr >= startKernelMap && s.Paddr != ^uint64(0) {
			pb := s.Paddr - (s.Vaddr - startKernelMap)
			return &pb
		}
	}
	return nil
}

func (b *elfBackend) ranges(yield func(start, last uint64) bool) {
	for _, r := range b.f.PhysicalRanges() {
		if !yield(r.Start, r.Last) {
			return
		}
	}
}
