package diskdump

import (
	"encoding/binary"
	"iter"
	"math/bits"
)

// rankGroup is how many 64-bit bitmap words share one precomputed rank:
// a lookup adds at most rankGroup-1 word popcounts to the table entry, and
// the table costs 8 bytes per 512 bits of bitmap.
const rankGroup = 8

// bitmap holds the 2nd bitmap ("page is in the dump") for pfns
// [base, base+64*len(words)), bit p LSB-first as on disk, with bits outside
// the part's pfn range cleared, plus prefix popcounts for O(1) rank.
type bitmap struct {
	base  uint64   // pfn of bit 0 of words[0]; a multiple of 64
	words []uint64 // bits
	ranks []uint64 // ranks[g] = set bits in words[:g*rankGroup]
	count uint64   // total set bits
}

// newBitmap builds a bitmap from on-disk bytes b, whose byte 0 holds pfn
// base (a multiple of 64), keeping only bits for pfns in [start, end).
func newBitmap(b []byte, base, start, end uint64) *bitmap {
	nw := (len(b) + 7) / 8
	bm := &bitmap{base: base, words: make([]uint64, nw)}
	for i := range nw {
		var w [8]byte
		copy(w[:], b[i*8:])
		bm.words[i] = binary.LittleEndian.Uint64(w[:])
	}
	// Clear bits below start and at or above end.
	for i := range bm.words {
		lo := base + uint64(i)*64
		hi := lo + 64
		if hi <= start || lo >= end {
			bm.words[i] = 0
			continue
		}
		if start > lo {
			bm.words[i] &^= 1<<(start-lo) - 1
		}
		if end < hi {
			bm.words[i] &= 1<<(end-lo) - 1
		}
	}
	bm.ranks = make([]uint64, (nw+rankGroup-1)/rankGroup+1)
	var c uint64
	for i, w := range bm.words {
		if i%rankGroup == 0 {
			bm.ranks[i/rankGroup] = c
		}
		c += uint64(bits.OnesCount64(w))
	}
	bm.ranks[len(bm.ranks)-1] = c
	bm.count = c
	return bm
}

// rank reports whether pfn's bit is set and, if so, how many set bits
// precede it: the index of its page descriptor.
func (bm *bitmap) rank(pfn uint64) (uint64, bool) {
	if pfn < bm.base {
		return 0, false
	}
	rel := pfn - bm.base
	wi := rel / 64
	if wi >= uint64(len(bm.words)) {
		return 0, false
	}
	w := bm.words[wi]
	bit := uint64(1) << (rel % 64)
	if w&bit == 0 {
		return 0, false
	}
	g := wi / rankGroup
	r := bm.ranks[g]
	for j := g * rankGroup; j < wi; j++ {
		r += uint64(bits.OnesCount64(bm.words[j]))
	}
	return r + uint64(bits.OnesCount64(w&(bit-1))), true
}

// all yields every set pfn in increasing order.
func (bm *bitmap) all() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for i, w := range bm.words {
			for w != 0 {
				t := bits.TrailingZeros64(w)
				if !yield(bm.base + uint64(i)*64 + uint64(t)) {
					return
				}
				w &= w - 1
			}
		}
	}
}
