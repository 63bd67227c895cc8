package btflayout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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
//
// Struct and Enum decode only the types they reach (see rawBTF); the whole
// blob is decoded by cilium/ebpf only when Spec is called.
type BTF struct {
	desc string
	raw  []byte
	r    *rawBTF

	mu      sync.Mutex
	structs map[string][]*Struct

	specOnce sync.Once
	spec     *btf.Spec
	specErr  error
}

// Spec returns the blob parsed by cilium/ebpf, for callers that need more
// than field offsets. It decodes every type on first use; an error wraps
// ErrCorrupt.
func (b *BTF) Spec() (*btf.Spec, error) {
	b.specOnce.Do(func() {
		b.spec, b.specErr = btf.LoadSpecFromReader(bytes.NewReader(b.raw))
		if b.specErr != nil {
			b.specErr = fmt.Errorf("btflayout: %s: %w: %v", b.desc, ErrCorrupt, b.specErr)
		}
	})
	return b.spec, b.specErr
}

// ByteOrder returns the byte order of the blob, which is the target's.
func (b *BTF) ByteOrder() binary.ByteOrder { return b.r.bo }

// Size returns the size of the raw blob in bytes.
func (b *BTF) Size() uint64 { return uint64(len(b.raw)) }

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
// /sys/kernel/btf/vmlinux or of a .BTF section), which the result keeps.
// desc names it in messages. A malformed blob is an error wrapping
// ErrCorrupt.
func ParseBTF(raw []byte, desc string) (*BTF, error) {
	r, err := newRawBTF(raw)
	if err != nil {
		return nil, fmt.Errorf("btflayout: %s: %w", desc, err)
	}
	return &BTF{desc: desc, raw: raw, r: r, structs: map[string][]*Struct{}}, nil
}

// FromMemory reads the vmlinux BTF of a dump from kernel memory at
// [start, stop), the addresses of the __start_BTF and __stop_BTF symbols,
// and parses it.
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
	_, total, err := header(hdr[:])
	if err != nil {
		return nil, fmt.Errorf("btflayout: at %#x: %w", start, err)
	}
	// The linker may pad the section; the header must fit in it.
	if total > size {
		return nil, fmt.Errorf("btflayout: BTF header at %#x describes %d bytes, section holds %d: %w", start, total, size, ErrCorrupt)
	}
	raw, err := readBlob(kmem, start, total)
	if err != nil {
		return nil, fmt.Errorf("btflayout: reading BTF at %#x (%d bytes): %w", start, total, err)
	}
	return ParseBTF(raw, fmt.Sprintf("vmlinux BTF in the dump at %#x", start))
}

// readBlob reads size bytes at addr, a size both the header and the
// section bounds agree on and at most MaxBTFSize. The last byte is read
// first: the buffer is allocated only once the memory is shown to be there.
func readBlob(kmem memory.Reader, addr, size uint64) ([]byte, error) {
	var last [1]byte
	if err := memory.ReadFull(kmem, last[:], addr+size-1); err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if err := memory.ReadFull(kmem, buf, addr); err != nil {
		return nil, err
	}
	return buf, nil
}

// Struct implements Source.
func (b *BTF) Struct(name string, need ...string) (*Struct, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cands, ok := b.structs[name]
	if !ok {
		var err error
		if cands, err = b.r.structs(name); err != nil {
			return nil, fmt.Errorf("btflayout: %s: struct %s: %w", b.desc, name, err)
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
	vals, ok, err := b.r.enum(name)
	if err != nil {
		return nil, fmt.Errorf("btflayout: %s: enum %s: %w", b.desc, name, err)
	}
	if !ok {
		return nil, notFound(b, "enum "+name)
	}
	return vals, nil
}
