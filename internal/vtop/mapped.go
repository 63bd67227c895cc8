package vtop

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Mapper lists what a translator's page tables map: the kernel's own
// record of where its virtual memory is, for scans of a region whose
// allocations nothing else lists (module memory on v6.9+, where
// vmap_area_list is gone).
type Mapper interface {
	// Mapped calls yield with every maximal run [start, end) of mapped
	// virtual addresses in [lo, hi), in increasing order, until yield
	// returns false. Page-table pages missing from the dump count as
	// unmapped. An error means there is no walk to enumerate.
	Mapped(lo, hi uint64, yield func(start, end uint64) bool) error
}

// ptWalker enumerates one architecture's tables. decode classifies an
// entry at level l (levels, the top, down to 1): present, a leaf (a page
// or block), and the next table's physical address.
type ptWalker struct {
	phys      memory.Reader
	bo        binary.ByteOrder
	root      uint64
	entrySize uint64
	levels    int
	shift     func(l int) uint // VA bit of the lowest index bit at level l
	bits      func(l int) uint // index bits at level l
	decode    func(e uint64, l int) (present, leaf bool, next uint64)
}

// maxMappedEntries bounds the page-table entries one Mapped reads: 2^22
// entries is 32 MiB of tables, far more than a kernel's module region has.
const maxMappedEntries = 1 << 22

// Mapped implements Mapper.
func (t *translator) Mapped(lo, hi uint64, yield func(start, end uint64) bool) error {
	if t.pt == nil {
		return fmt.Errorf("vtop: no page-table walk to enumerate: %w", ErrNotMapped)
	}
	if hi <= lo {
		return nil
	}
	w := t.pt()
	var runStart, runEnd uint64
	have, stopped := false, false
	entries := 0
	emit := func(s, e uint64) {
		if have && s == runEnd {
			runEnd = e
			return
		}
		if have && !yield(runStart, runEnd) {
			stopped = true
			return
		}
		runStart, runEnd, have = s, e, true
	}
	var walk func(table uint64, l int, lo, last uint64)
	walk = func(table uint64, l int, lo, last uint64) {
		shift, bits := w.shift(l), w.bits(l)
		span := uint64(1) << shift
		buf := make([]byte, w.entrySize)
		for va := lo; va <= last && !stopped; {
			end := va | (span - 1) // last address of this entry
			if entries++; entries > maxMappedEntries {
				stopped = true
				return
			}
			at := table + (va>>shift&(1<<bits-1))*w.entrySize
			if memory.ReadFull(w.phys, buf, at) == nil {
				e := uint64(0)
				if w.entrySize == 8 {
					e = w.bo.Uint64(buf)
				} else {
					e = uint64(w.bo.Uint32(buf))
				}
				present, leaf, next := w.decode(e, l)
				switch {
				case !present:
				case leaf || l == 1:
					emit(va, min(end, last)+1)
				default:
					walk(next, l-1, va, min(end, last))
				}
			}
			if end >= last {
				return
			}
			va = end + 1
		}
	}
	walk(w.root, w.levels, lo, hi-1)
	if have && !stopped {
		yield(runStart, runEnd)
	}
	return nil
}

func (x *x86) ptWalker() *ptWalker {
	return &ptWalker{
		phys: x.phys, bo: x.bo, root: x.root, entrySize: 8, levels: x.levels,
		shift: func(l int) uint { return 12 + 9*uint(l-1) },
		bits:  func(int) uint { return 9 },
		decode: func(e uint64, l int) (bool, bool, uint64) {
			return e&x86Present != 0, (l == 2 || l == 3) && e&x86PSE != 0, e & x86PTEAddrMask &^ x.sme
		},
	}
}

func (a *arm64) ptWalker() *ptWalker {
	ps := a.pageShift
	shift := func(l int) uint { return ps + (ps-3)*uint(l-1) }
	return &ptWalker{
		phys: a.phys, bo: binary.LittleEndian, root: a.root, entrySize: 8, levels: a.levels,
		shift: shift,
		bits: func(l int) uint {
			if l == a.levels {
				return a.vaBits - shift(l)
			}
			return ps - 3
		},
		decode: func(e uint64, l int) (bool, bool, uint64) {
			switch e & armDescTypeMask {
			case armDescTable:
				return true, l == 1, a.oa(e)
			case armDescBlock:
				return l > 1 && shift(l) <= a.maxBlock, true, 0
			}
			return false, false, 0
		},
	}
}

func (x *i386) ptWalker() *ptWalker {
	if !x.pae {
		return &ptWalker{
			phys: x.phys, bo: x.bo, root: x.root, entrySize: 4, levels: 2,
			shift: func(l int) uint { return 12 + 10*uint(l-1) },
			bits:  func(int) uint { return 10 },
			decode: func(e uint64, l int) (bool, bool, uint64) {
				return e&x86Present != 0, l == 2 && e&x86PSE != 0, e & 0xfffff000
			},
		}
	}
	return &ptWalker{
		phys: x.phys, bo: x.bo, root: x.root, entrySize: 8, levels: 3,
		shift: func(l int) uint { return 12 + 9*uint(l-1) },
		bits: func(l int) uint {
			if l == 3 {
				return 2
			}
			return 9
		},
		decode: func(e uint64, l int) (bool, bool, uint64) {
			return e&x86Present != 0, l == 2 && e&x86PSE != 0, e & x86PTEAddrMask
		},
	}
}
