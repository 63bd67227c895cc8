package memory

import "slices"

// Recorder wraps a Reader and remembers which pages every read touched, so
// that a caller can later keep exactly those pages (see kdump-syms extract).
// It is not safe for concurrent use.
type Recorder struct {
	r         Reader
	pageShift uint
	pages     map[uint64]struct{}
}

// NewRecorder records reads of r in pages of 1<<pageShift bytes.
func NewRecorder(r Reader, pageShift uint) *Recorder {
	return &Recorder{r: r, pageShift: pageShift, pages: make(map[uint64]struct{})}
}

// ReadAt reads from the wrapped Reader and records every page in
// [addr, addr+len(p)), whether or not the read succeeded: a page that was
// asked for and missing is part of what a decoder looked at.
func (rec *Recorder) ReadAt(p []byte, addr uint64) (int, error) {
	if len(p) > 0 {
		last := addr + uint64(len(p)) - 1
		if last < addr {
			last = ^uint64(0)
		}
		for pfn := addr >> rec.pageShift; pfn <= last>>rec.pageShift; pfn++ {
			rec.pages[pfn] = struct{}{}
			if pfn == ^uint64(0)>>rec.pageShift {
				break
			}
		}
	}
	return rec.r.ReadAt(p, addr)
}

// Pages returns the page frame numbers touched so far, in increasing order.
func (rec *Recorder) Pages() []uint64 {
	out := make([]uint64, 0, len(rec.pages))
	for pfn := range rec.pages {
		out = append(out, pfn)
	}
	slices.Sort(out)
	return out
}

// Reset forgets every recorded page.
func (rec *Recorder) Reset() { clear(rec.pages) }
