package testutil

import (
	"encoding/binary"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// SparseMemory is synthetic memory of 4 KiB pages for tests: pages spring
// into existence when written, and a read of a page never written fails as
// an unsaved page of a dump does (a *memory.FaultError wrapping
// memory.ErrNotSaved). Multi-byte values are little-endian.
type SparseMemory struct {
	// Space names the address space in faults (memory.SpaceKernelVirtual when empty).
	Space memory.Space
	Pages map[uint64][]byte
}

// NewSparseMemory returns empty memory.
func NewSparseMemory() *SparseMemory { return &SparseMemory{Pages: map[uint64][]byte{}} }

// Write stores b at addr.
func (m *SparseMemory) Write(addr uint64, b []byte) {
	for len(b) > 0 {
		pg := addr &^ 4095
		p := m.Pages[pg]
		if p == nil {
			p = make([]byte, 4096)
			m.Pages[pg] = p
		}
		n := copy(p[addr-pg:], b)
		b, addr = b[n:], addr+uint64(n)
	}
}

// PutU64 stores v at addr.
func (m *SparseMemory) PutU64(addr, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	m.Write(addr, b[:])
}

// PutU32 stores v at addr.
func (m *SparseMemory) PutU32(addr uint64, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	m.Write(addr, b[:])
}

// Drop removes the pages of [addr, addr+n), as makedumpfile's filtering
// does.
func (m *SparseMemory) Drop(addr, n uint64) {
	for pg := addr &^ 4095; pg < addr+n; pg += 4096 {
		delete(m.Pages, pg)
	}
}

// ReadAt implements memory.Reader.
func (m *SparseMemory) ReadAt(p []byte, addr uint64) (int, error) {
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		pg := a &^ 4095
		page := m.Pages[pg]
		if page == nil {
			space := m.Space
			if space == "" {
				space = memory.SpaceKernelVirtual
			}
			return n, memory.Fault(a, space, "", memory.ErrNotSaved)
		}
		n += copy(p[n:], page[a-pg:])
	}
	return n, nil
}

// Holes returns r with the 4 KiB pages whose frame numbers (address>>12)
// are in frames reading as not saved in space: the bytes before a hole are
// read, then a *memory.FaultError at the hole's first byte.
func Holes(r memory.Reader, space memory.Space, frames map[uint64]bool) memory.Reader {
	return memory.ReaderFunc(func(p []byte, addr uint64) (int, error) {
		for off := uint64(0); off < uint64(len(p)); {
			a := addr + off
			if frames[a>>12] {
				n := 0
				if off > 0 {
					n, _ = r.ReadAt(p[:off], addr)
				}
				return n, memory.Fault(a, space, "test hole", memory.ErrNotSaved)
			}
			off += 4096 - a%4096
		}
		return r.ReadAt(p, addr)
	})
}
