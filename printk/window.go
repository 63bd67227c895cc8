package printk

import (
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Reads of a region (the descriptor array, the info array, a data ring)
// go through a window: one aligned chunk of the region is held at a time,
// read with one ReadAt, so that walking the ring in order costs a read per
// chunk instead of three per record. A chunk that cannot be read whole is
// read page by page, so one filtered page loses only the records that
// touch it.
const (
	chunkSize  = 64 << 10
	faultGrain = 4 << 10 // the smallest page of any architecture the dump may hold
)

type window struct {
	r    memory.Reader
	base uint64 // kernel virtual address of the region
	end  uint64 // base + its size; the caller checked it does not wrap

	lo, hi uint64 // the loaded chunk [lo, hi); empty before the first load
	buf    []byte
	fault  [chunkSize / faultGrain]error // per page-sized grain of the chunk (aligned at lo &^ (chunkSize-1))
}

func newWindow(r memory.Reader, base, size uint64) *window {
	return &window{r: r, base: base, end: base + size}
}

// read fills p from offset off of the region; off+len(p) must not pass the
// region's end. The error is the fault of the first unreadable byte.
func (w *window) read(p []byte, off uint64) error {
	addr := w.base + off
	for len(p) > 0 {
		if addr < w.lo || addr >= w.hi {
			w.load(addr)
		}
		n := min(uint64(len(p)), w.hi-addr)
		cs := w.lo &^ (chunkSize - 1)
		for g := (addr - cs) / faultGrain; g <= (addr+n-1-cs)/faultGrain; g++ {
			if err := w.fault[g]; err != nil {
				return err
			}
		}
		copy(p, w.buf[addr-w.lo:addr-w.lo+n])
		p, addr = p[n:], addr+n
	}
	return nil
}

// load reads the chunk holding addr, clipped to the region.
func (w *window) load(addr uint64) {
	cs := addr &^ (chunkSize - 1)
	w.lo = max(cs, w.base)
	w.hi = w.end
	if cs+chunkSize > cs && cs+chunkSize < w.hi { // the chunk's end may be 2^64
		w.hi = cs + chunkSize
	}
	if w.buf == nil {
		w.buf = make([]byte, chunkSize)
	}
	w.buf = w.buf[:w.hi-w.lo]
	clear(w.fault[:])
	if err := memory.ReadFull(w.r, w.buf, w.lo); err == nil {
		return
	}
	for a := w.lo; a < w.hi; {
		next := min((a&^(faultGrain-1))+faultGrain, w.hi)
		if next <= a { // the last grain of the address space
			next = w.hi
		}
		if err := memory.ReadFull(w.r, w.buf[a-w.lo:next-w.lo], a); err != nil {
			w.fault[(a-cs)/faultGrain] = err
		}
		a = next
	}
}
