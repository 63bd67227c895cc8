package elfcore

import (
	"cmp"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// segMap maps one address space onto the file: disjoint ranges sorted by
// start address, kept as a struct of arrays so that the binary search
// touches only starts.
type segMap struct {
	f      *File
	space  memory.Space
	starts []uint64
	pieces []piece
}

// piece is the part [start, last] of a segment that wins its range.
type piece struct {
	last   uint64 // inclusive, so that a range may end at 2^64
	base   uint64 // the segment's start address
	off    int64  // the segment's p_offset
	filesz uint64
}

// entry is a segment placed in an address space, before flattening.
type entry struct {
	start, last uint64
	seg         int
}

func (f *File) buildMaps() {
	const allOnes32 = 0xffffffff
	var phys, virt []entry
	zeroPaddr := 0
	distinctV := map[uint64]bool{}
	allVZero, allVEqP := true, true
	for _, s := range f.segs {
		if s.Memsz == 0 {
			continue
		}
		if s.Paddr == 0 {
			zeroPaddr++
			distinctV[s.Vaddr] = true
		}
		if s.Vaddr != 0 {
			allVZero = false
		}
		if s.Vaddr != s.Paddr {
			allVEqP = false
		}
	}
	// Several segments at physical 0 with different virtual addresses: the
	// producer did not fill p_paddr (/proc/kcore before v4.11).
	dropZero := f.kcore || (zeroPaddr > 1 && len(distinctV) > 1)
	for i, s := range f.segs {
		if s.Memsz == 0 {
			continue
		}
		if last := s.Paddr + s.Memsz - 1; last >= s.Paddr &&
			s.Paddr != ^uint64(0) && !(f.class == 1 && s.Paddr == allOnes32) &&
			!(dropZero && s.Paddr == 0) {
			phys = append(phys, entry{s.Paddr, last, i})
		}
		if last := s.Vaddr + s.Memsz - 1; last >= s.Vaddr && s.Vaddr != ^uint64(0) {
			virt = append(virt, entry{s.Vaddr, last, i})
		}
	}
	f.phys = f.flatten(phys, memory.SpacePhysical)
	if !allVZero && !allVEqP && len(virt) > 0 {
		f.virt = f.flatten(virt, memory.SpaceVirtual)
	}
}

// flatten resolves overlaps into disjoint pieces. Bytes a segment holds in
// the file win over another segment's zero-filled tail (p_filesz <
// p_memsz), wherever either starts: a tail is memory the producer did not
// save, so it must not hide memory another segment did save. Among bytes
// of the same kind the lowest start wins, then program header order.
func (f *File) flatten(es []entry, space memory.Space) *segMap {
	var data, tails []entry
	for _, e := range es {
		fz := f.segs[e.seg].Filesz
		switch {
		case fz == 0:
			tails = append(tails, e)
		case fz-1 >= e.last-e.start:
			data = append(data, e)
		default:
			data = append(data, entry{e.start, e.start + fz - 1, e.seg})
			tails = append(tails, entry{e.start + fz, e.last, e.seg})
		}
	}
	held := disjoint(data)
	free := subtract(disjoint(tails), held)
	all := append(held, free...)
	slices.SortFunc(all, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	m := &segMap{f: f, space: space, starts: make([]uint64, len(all)), pieces: make([]piece, len(all))}
	for i, sp := range all {
		s := f.segs[sp.seg]
		base := s.Paddr
		if space == memory.SpaceVirtual {
			base = s.Vaddr
		}
		m.starts[i] = sp.start
		m.pieces[i] = piece{last: sp.last, base: base, off: s.Off, filesz: s.Filesz}
	}
	return m
}

// span is the part [start, last] of segment seg that wins its range.
type span struct {
	start, last uint64
	seg         int
}

// disjoint resolves overlaps among es: the lowest start wins, then program
// header order. The result is sorted and disjoint.
func disjoint(es []entry) []span {
	slices.SortFunc(es, func(a, b entry) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(a.seg, b.seg)
	})
	var out []span
	var covered uint64 // last address covered so far
	for _, e := range es {
		start := e.start
		if len(out) > 0 {
			if e.last <= covered {
				continue // shadowed by earlier segments
			}
			if start <= covered {
				start = covered + 1
			}
		}
		out = append(out, span{start, e.last, e.seg})
		covered = e.last
	}
	return out
}

// subtract returns the parts of the sorted disjoint spans a that no span
// of the sorted disjoint b covers.
func subtract(a, b []span) []span {
	var out []span
	j := 0
	for _, s := range a {
		for j < len(b) && b[j].last < s.start {
			j++
		}
		start := s.start
		done := false
		for k := j; k < len(b) && b[k].start <= s.last; k++ {
			if b[k].start > start {
				out = append(out, span{start, b[k].start - 1, s.seg})
			}
			if b[k].last >= s.last {
				done = true
				break
			}
			start = b[k].last + 1
		}
		if !done {
			out = append(out, span{start, s.last, s.seg})
		}
	}
	return out
}

// Physical returns a reader over physical memory (p_paddr). Addresses
// outside every segment fail with a *memory.FaultError whose Space is
// "physical" and whose cause is memory.ErrNotSaved; segment data cut off by
// the end of the file fails with a *memory.FaultError whose cause is a
// *FormatError naming the file offset (matching memory.ErrCorrupt and
// io.ErrUnexpectedEOF).
func (f *File) Physical() memory.Reader { return f.phys }

// Virtual returns a reader over the virtual addresses the producer wrote in
// p_vaddr, and whether there are any (see the package documentation). Its
// errors are as for Physical, with Space memory.SpaceVirtual.
func (f *File) Virtual() (memory.Reader, bool) {
	if f.virt == nil {
		return nil, false
	}
	return f.virt, true
}

// ReadAt implements memory.Reader.
func (m *segMap) ReadAt(p []byte, addr uint64) (int, error) {
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		if n > 0 && a == 0 {
			return n, memory.Fault(a, m.space, "read wraps the address space", memory.ErrNotSaved)
		}
		i, found := slices.BinarySearch(m.starts, a)
		if !found {
			i--
		}
		if i < 0 || a > m.pieces[i].last {
			return n, memory.Fault(a, m.space, "", memory.ErrNotSaved)
		}
		pc := &m.pieces[i]
		want := uint64(len(p) - n)
		if avail := pc.last - a; avail < want-1 {
			want = avail + 1
		}
		chunk := p[n : n+int(want)]
		if delta := a - pc.base; delta < pc.filesz {
			fn := min(want, pc.filesz-delta)
			got, err := m.f.readFile(chunk[:fn], pc.off+int64(delta))
			n += got
			if err != nil {
				return n, memory.Fault(a+uint64(got), m.space, "", err)
			}
			chunk = chunk[fn:]
		}
		clear(chunk)
		n += len(chunk)
	}
	return n, nil
}

// Range is an inclusive range of addresses [Start, Last].
type Range struct{ Start, Last uint64 }

// PhysicalRanges returns the disjoint physical ranges whose data the file
// holds, in ascending order, for callers that walk saved memory (a scan
// for the VMCOREINFO note, a comparison with another dump). Zero-filled
// tails (p_filesz < p_memsz) are left out: they were not saved, and
// makedumpfile -E writes excluded pages that way.
func (f *File) PhysicalRanges() []Range {
	var out []Range
	for i, s := range f.phys.starts {
		pc := &f.phys.pieces[i]
		if s-pc.base >= pc.filesz {
			continue
		}
		last := pc.last
		if fileLast := pc.base + pc.filesz - 1; fileLast < last {
			last = fileLast
		}
		if n := len(out); n > 0 && out[n-1].Last+1 == s {
			out[n-1].Last = last // adjacent: merge
			continue
		}
		out = append(out, Range{s, last})
	}
	return out
}
