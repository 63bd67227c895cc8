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
	// vaLimit, if not 0, is the end of what the top table translates
	// (s390x: a region-third table's 4 TiB): nothing at or above it is
	// mapped, rather than aliasing to lower indexes.
	vaLimit uint64
	// vaBase, if not 0, is the start of what the top table translates
	// (ppc64: PAGE_OFFSET, the kernel's quadrant): nothing below it is
	// mapped, rather than aliasing to the same indexes.
	vaBase uint64
	// length, if not nil, gives the indexes [first, last] of the next
	// table that exist, from the entry at level l pointing at it (s390x:
	// a region entry's table offset and length); other indexes are
	// unmapped. The top table has all of its indexes.
	length func(e uint64, l int) (first, last uint64)
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
	var walk func(table uint64, l int, lo, last, first, lastIdx uint64)
	walk = func(table uint64, l int, lo, last, first, lastIdx uint64) {
		shift, bits := w.shift(l), w.bits(l)
		span := uint64(1) << shift
		buf := make([]byte, w.entrySize)
		for va := lo; va <= last && !stopped; {
			end := va | (span - 1) // last address of this entry
			if entries++; entries > maxMappedEntries {
				stopped = true
				return
			}
			idx := va >> shift & (1<<bits - 1)
			at := table + idx*w.entrySize
			if idx >= first && idx <= lastIdx && memory.ReadFull(w.phys, buf, at) == nil {
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
					f, li := uint64(0), ^uint64(0)
					if w.length != nil {
						f, li = w.length(e, l)
					}
					walk(next, l-1, va, min(end, last), f, li)
				}
			}
			if end >= last {
				return
			}
			va = end + 1
		}
	}
	if w.vaLimit != 0 {
		if lo >= w.vaLimit {
			return nil
		}
		hi = min(hi, w.vaLimit)
	}
	if lo < w.vaBase {
		if hi <= w.vaBase {
			return nil
		}
		lo = w.vaBase
	}
	walk(w.root, w.levels, lo, hi-1, 0, ^uint64(0))
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

func (s *s390) ptWalker() *ptWalker {
	w := &ptWalker{
		phys: s.phys, bo: binary.BigEndian, root: s.root, entrySize: 8, levels: s.top,
		shift: func(l int) uint { return s390Shift[l] },
		bits: func(l int) uint {
			if l == s390Page {
				return 8
			}
			return 11
		},
		// As walk: an invalid entry, or one of the wrong table type,
		// maps nothing.
		decode: func(e uint64, l int) (bool, bool, uint64) {
			if l == s390Page {
				return e&s390PageInvalid == 0, true, 0
			}
			if e&s390EntryInvalid != 0 || int(e&s390EntryTypeMask)>>2 != l-2 {
				return false, false, 0
			}
			switch {
			case (l == s390Segment || l == s390RegionThird) && e&s390EntryFC != 0:
				return true, true, 0
			case l == s390Segment:
				return true, false, e & s390PTOrigin
			}
			return true, false, e & s390TableOrigin
		},
		// A region entry says which quarters of the next table exist; a
		// segment entry's page table is whole.
		length: func(e uint64, l int) (uint64, uint64) {
			if l == s390Segment {
				return 0, 1<<8 - 1
			}
			return (e & s390RegionTF >> 6) << 9, (e&s390RegionTL+1)<<9 - 1
		},
	}
	if s.top < s390RegionFirst {
		w.vaLimit = 1 << (s390Shift[s.top] + 11)
	}
	return w
}

func (r *riscv64) ptWalker() *ptWalker {
	return &ptWalker{
		phys: r.phys, bo: binary.LittleEndian, root: r.root, entrySize: 8, levels: r.levels,
		shift: func(l int) uint { return rvPageShift + 9*uint(l-1) },
		bits:  func(int) uint { return 9 },
		// As walk: a leaf it would refuse maps nothing.
		decode: func(e uint64, l int) (bool, bool, uint64) {
			if e&rvValid == 0 {
				return false, false, 0
			}
			if e&rvLeaf == 0 {
				return l > 1, false, rvPA(e)
			}
			_, bad := rvLeafPA(e, l, 0)
			return bad == "", true, 0
		},
	}
}
