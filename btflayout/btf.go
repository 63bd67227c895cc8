package btflayout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cilium/ebpf/btf"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// MaxBTFSize caps the vmlinux BTF read from a dump. Distribution kernels
// carry 3–8 MiB (Debian 6.1 amd64: 5.3 MiB); a size beyond the cap is taken
// as corrupt symbol addresses rather than allocated.
const MaxBTFSize = 64 << 20

// btfHeaderLen is the size of the BTF header's fixed part (uapi
// linux/btf.h); v7.1 may append layout_off/layout_len (32 bytes in all),
// and any hdr_len up to the blob size is tolerated, as cilium/ebpf does.
const btfHeaderLen = 24

// BTF is a Source backed by a BTF blob. It is safe for concurrent use.
type BTF struct {
	desc string
	spec *btf.Spec
	bo   binary.ByteOrder
	size uint64

	mu      sync.Mutex
	structs map[string][]*Struct
}

// Spec returns the parsed cilium/ebpf spec, for callers that need more than
// field offsets.
func (b *BTF) Spec() *btf.Spec { return b.spec }

// ByteOrder returns the byte order of the blob, which is the target's.
func (b *BTF) ByteOrder() binary.ByteOrder { return b.bo }

// Size returns the size of the raw blob in bytes.
func (b *BTF) Size() uint64 { return b.size }

// Describe implements Source.
func (b *BTF) Describe() string { return b.desc }

// header checks the fixed BTF header at the start of raw (at least 24
// bytes) and returns the byte order and the blob's total size.
func header(raw []byte) (binary.ByteOrder, uint64, error) {
	if len(raw) < btfHeaderLen {
		return nil, 0, fmt.Errorf("btflayout: BTF header of %d bytes: %w", len(raw), ErrCorrupt)
	}
	var bo binary.ByteOrder
	switch {
	case raw[0] == 0x9f && raw[1] == 0xeb:
		bo = binary.LittleEndian
	case raw[0] == 0xeb && raw[1] == 0x9f:
		bo = binary.BigEndian
	default:
		return nil, 0, fmt.Errorf("btflayout: BTF magic %#02x%02x: %w", raw[0], raw[1], ErrCorrupt)
	}
	if raw[2] != 1 {
		return nil, 0, fmt.Errorf("btflayout: BTF version %d: %w", raw[2], errors.ErrUnsupported)
	}
	hdrLen := uint64(bo.Uint32(raw[4:]))
	typeOff, typeLen := uint64(bo.Uint32(raw[8:])), uint64(bo.Uint32(raw[12:]))
	strOff, strLen := uint64(bo.Uint32(raw[16:])), uint64(bo.Uint32(raw[20:]))
	if hdrLen < btfHeaderLen || hdrLen > 1<<12 {
		return nil, 0, fmt.Errorf("btflayout: BTF header length %d: %w", hdrLen, ErrCorrupt)
	}
	total := hdrLen + max(typeOff+typeLen, strOff+strLen)
	if total > MaxBTFSize {
		return nil, 0, fmt.Errorf("btflayout: BTF of %d bytes exceeds the %d-byte cap: %w", total, MaxBTFSize, ErrCorrupt)
	}
	return bo, total, nil
}

// ParseBTF parses a raw vmlinux BTF blob (the contents of
// /sys/kernel/btf/vmlinux or of a .BTF section). desc names it in messages.
// A malformed blob is an error wrapping ErrCorrupt.
func ParseBTF(raw []byte, desc string) (*BTF, error) {
	bo, total, err := header(raw)
	if err != nil {
		return nil, err
	}
	if total > uint64(len(raw)) {
		return nil, fmt.Errorf("btflayout: %s: header describes %d bytes, blob has %d: %w", desc, total, len(raw), ErrCorrupt)
	}
	return load(&elfImage{bo: bo, btfSize: uint64(len(raw)), body: bytes.NewReader(raw)}, desc, uint64(len(raw)))
}

// FromMemory reads the vmlinux BTF of a dump from kernel memory at
// [start, stop), the addresses of the __start_BTF and __stop_BTF symbols,
// in one bulk read, and parses it.
//
// A missing range (start or stop 0) is an error wrapping ErrNoBTF. A range
// that is empty, inverted, larger than MaxBTFSize, or disagrees with the
// blob's header is an error wrapping ErrCorrupt. Memory that cannot be read
// is an error wrapping the reader's (for example *memory.FaultError with
// memory.ErrNotSaved).
func FromMemory(kmem memory.Reader, start, stop uint64) (*BTF, error) {
	if start == 0 || stop == 0 {
		return nil, fmt.Errorf("btflayout: __start_BTF/__stop_BTF unknown: %w", ErrNoBTF)
	}
	if stop <= start || stop-start < btfHeaderLen || stop-start > MaxBTFSize {
		return nil, fmt.Errorf("btflayout: BTF range [%#x, %#x): %w", start, stop, ErrCorrupt)
	}
	size := stop - start
	var hdr [btfHeaderLen]byte
	if err := memory.ReadFull(kmem, hdr[:], start); err != nil {
		return nil, fmt.Errorf("btflayout: BTF header at %#x: %w", start, err)
	}
	bo, total, err := header(hdr[:])
	if err != nil {
		return nil, fmt.Errorf("btflayout: at %#x: %w", start, err)
	}
	// The linker may pad the section; the header must fit in it.
	if total > size {
		return nil, fmt.Errorf("btflayout: BTF header at %#x describes %d bytes, section holds %d: %w", start, total, size, ErrCorrupt)
	}
	img := &elfImage{bo: bo, btfSize: total, body: memReaderAt{kmem, start}}
	b, err := load(img, fmt.Sprintf("vmlinux BTF in the dump at %#x", start), total)
	if err != nil && img.readErr != nil {
		// cilium/ebpf reports the read failure in its own words; give the
		// memory error (with its address) to the caller instead.
		return nil, fmt.Errorf("btflayout: reading BTF at %#x (%d bytes): %w", start, total, img.readErr)
	}
	return b, err
}

func load(img *elfImage, desc string, size uint64) (*BTF, error) {
	spec, err := btf.LoadSpecFromReader(img)
	if err != nil {
		if img.readErr != nil {
			return nil, img.readErr
		}
		return nil, fmt.Errorf("btflayout: %s: %w: %w", desc, ErrCorrupt, err)
	}
	return &BTF{desc: desc, spec: spec, bo: img.bo, size: size, structs: map[string][]*Struct{}}, nil
}

// memReaderAt reads kernel memory from base as an io.ReaderAt at offset 0.
type memReaderAt struct {
	m    memory.Reader
	base uint64
}

func (r memReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := memory.ReadFull(r.m, p, r.base+uint64(off)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Struct implements Source.
func (b *BTF) Struct(name string, need ...string) (*Struct, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cands, ok := b.structs[name]
	if !ok {
		types, err := b.spec.AnyTypesByName(name)
		if err != nil && !errors.Is(err, btf.ErrNotFound) {
			return nil, fmt.Errorf("btflayout: %s: struct %s: %w: %w", b.desc, name, ErrCorrupt, err)
		}
		for _, t := range types {
			switch t := t.(type) {
			case *btf.Struct:
				cands = append(cands, &Struct{Name: name, Size: uint64(t.Size), fields: flatten(nil, t.Members, 0)})
			case *btf.Union:
				cands = append(cands, &Struct{Name: name, Size: uint64(t.Size), fields: flatten(nil, t.Members, 0)})
			}
		}
		b.structs[name] = cands
	}
	for _, s := range cands {
		if s.Has(need...) {
			return s, nil
		}
	}
	return nil, notFound(b, needDesc(name, need))
}

// Enum implements Source.
func (b *BTF) Enum(name string) (map[string]int64, error) {
	types, err := b.spec.AnyTypesByName(name)
	if err != nil && !errors.Is(err, btf.ErrNotFound) {
		return nil, fmt.Errorf("btflayout: %s: enum %s: %w: %w", b.desc, name, ErrCorrupt, err)
	}
	for _, t := range types {
		if e, ok := t.(*btf.Enum); ok {
			out := make(map[string]int64, len(e.Values))
			for _, v := range e.Values {
				out[v.Name] = int64(v.Value)
			}
			return out, nil
		}
	}
	return nil, notFound(b, "enum "+name)
}

// flatten appends the members of a struct or union whose start lies
// baseBits into the outermost struct, descending into anonymous members.
func flatten(out []Field, members []btf.Member, baseBits uint64) []Field {
	for _, m := range members {
		off := baseBits + uint64(m.Offset)
		if m.Name == "" {
			switch t := btf.UnderlyingType(m.Type).(type) {
			case *btf.Struct:
				out = flatten(out, t.Members, off)
			case *btf.Union:
				out = flatten(out, t.Members, off)
			}
			continue
		}
		f := Field{Name: m.Name, Offset: off / 8}
		if m.BitfieldSize > 0 {
			f.BitOffset, f.BitSize = off, uint64(m.BitfieldSize)
		}
		if n, err := btf.Sizeof(m.Type); err == nil {
			f.Size = uint64(n)
		}
		switch t := btf.UnderlyingType(m.Type).(type) {
		case *btf.Int:
			f.Kind = KindInt
		case *btf.Pointer:
			f.Kind = KindPointer
			f.TypeName = btf.UnderlyingType(t.Target).TypeName()
		case *btf.Array:
			f.Kind = KindArray
			f.Count = uint64(t.Nelems)
			f.TypeName = btf.UnderlyingType(t.Type).TypeName()
			if n, err := btf.Sizeof(t.Type); err == nil {
				f.ElemSize = uint64(n)
			}
		case *btf.Struct:
			f.Kind, f.TypeName = KindStruct, t.Name
		case *btf.Union:
			f.Kind, f.TypeName = KindUnion, t.Name
		case *btf.Enum:
			f.Kind, f.TypeName = KindEnum, t.Name
		default:
			f.Kind = KindOther
		}
		out = append(out, f)
	}
	return out
}

// elfImage presents a BTF blob as a minimal relocatable ELF file with a
// .BTF section (plus the empty .symtab cilium/ebpf insists on), so that
// cilium/ebpf reads the section with one exactly sized read instead of
// growing a buffer with io.ReadAll as it does for raw blobs: for a 5 MiB
// vmlinux BTF that is the difference between one 5 MiB allocation and about
// 25 MiB of garbage. body is read at most once, in ascending order.
type elfImage struct {
	bo      binary.ByteOrder
	btfSize uint64
	body    io.ReaderAt // the blob, at offset 0
	readErr error       // first error of body

	once sync.Once
	head []byte
}

const (
	elfHeaderSize  = 64
	elfSectionSize = 64
	elfSections    = 5 // null, .BTF, .symtab, .strtab, .shstrtab
	shstrtab       = "\x00.BTF\x00.symtab\x00.strtab\x00.shstrtab\x00"
)

func (e *elfImage) build() {
	symOff := uint64(elfHeaderSize + elfSections*elfSectionSize)
	strOff := symOff + 24
	shstrOff := strOff + 1
	btfOff := (shstrOff + uint64(len(shstrtab)) + 7) &^ 7
	h := make([]byte, btfOff)
	copy(h, "\x7fELF")
	h[4] = 2 // ELFCLASS64
	if e.bo == binary.BigEndian {
		h[5] = 2
	} else {
		h[5] = 1
	}
	h[6] = 1 // EV_CURRENT
	bo := e.bo
	bo.PutUint16(h[16:], 1)   // ET_REL
	bo.PutUint16(h[18:], 247) // EM_BPF
	bo.PutUint32(h[20:], 1)
	bo.PutUint64(h[40:], elfHeaderSize) // e_shoff
	bo.PutUint16(h[52:], elfHeaderSize)
	bo.PutUint16(h[58:], elfSectionSize)
	bo.PutUint16(h[60:], elfSections)
	bo.PutUint16(h[62:], elfSections-1) // e_shstrndx
	sec := func(i int, name, typ uint32, off, size uint64, link, info uint32, entsize uint64) {
		s := h[elfHeaderSize+i*elfSectionSize:]
		bo.PutUint32(s[0:], name)
		bo.PutUint32(s[4:], typ)
		bo.PutUint64(s[24:], off)
		bo.PutUint64(s[32:], size)
		bo.PutUint32(s[40:], link)
		bo.PutUint32(s[44:], info)
		bo.PutUint64(s[48:], 1)
		bo.PutUint64(s[56:], entsize)
	}
	sec(1, 1, 1, btfOff, e.btfSize, 0, 0, 0) // .BTF, SHT_PROGBITS
	sec(2, 6, 2, symOff, 24, 3, 1, 24)       // .symtab, SHT_SYMTAB
	sec(3, 14, 3, strOff, 1, 0, 0, 0)        // .strtab
	sec(4, 22, 3, shstrOff, uint64(len(shstrtab)), 0, 0, 0)
	copy(h[shstrOff:], shstrtab)
	e.head = h
}

// ReadAt implements io.ReaderAt over the synthetic file.
func (e *elfImage) ReadAt(p []byte, off int64) (int, error) {
	e.once.Do(e.build)
	if off < 0 {
		return 0, fmt.Errorf("btflayout: negative offset %d", off)
	}
	n := 0
	if uint64(off) < uint64(len(e.head)) {
		n = copy(p, e.head[off:])
		p, off = p[n:], off+int64(n)
	}
	if len(p) == 0 {
		return n, nil
	}
	rel := uint64(off) - uint64(len(e.head))
	if rel >= e.btfSize {
		return n, io.EOF
	}
	want := p[:min(uint64(len(p)), e.btfSize-rel)]
	m, err := e.body.ReadAt(want, int64(rel))
	n += m
	if err != nil && err != io.EOF {
		if e.readErr == nil {
			e.readErr = err
		}
		return n, err
	}
	if m < len(p) {
		return n, io.EOF
	}
	return n, nil
}
