package kallsyms

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// tokens is the expanded token table, laid out for fast expansion: the
// first 16 bytes of every token sit in a fixed 16-byte slot, copied whole;
// the few longer tokens (6.1 and 6.12 amd64 have one of 19 bytes, 6.12
// arm64 eight of 17–22) are finished from long.
type tokens struct {
	short [256][16]byte
	n     [256]uint16
	long  [256][]byte // tokens longer than 16 bytes
	// room is how far one code may write past the end of what came
	// before it: max(16, longest token); 0 when a token is longer than
	// maxFastToken and expand always takes its careful path.
	room int
}

// maxFastToken is the longest token the fast path of expand handles; a
// table with a longer one (no real kernel has one) is expanded carefully.
const maxFastToken = 64

func newTokens(table []byte, index *[256]uint16) *tokens {
	t := &tokens{room: 16}
	for c := range 256 {
		s := table[index[c]:]
		l := 0
		for s[l] != 0 {
			l++
		}
		t.n[c] = uint16(l)
		copy(t.short[c][:], s[:min(l, 16)])
		if l > 16 {
			t.long[c] = s[:l:l]
		}
		switch {
		case l > maxFastToken:
			t.room = -1
		case t.room > 0:
			t.room = max(t.room, l)
		}
	}
	t.room = max(t.room, 0)
	return t
}

// expand appends the expansion of codes to dst. With room for it
// (cap(dst)-len(dst) >= t.room*len(codes)) it runs unchecked stores.
func (t *tokens) expand(dst []byte, codes []byte) []byte {
	if t.room > 0 && cap(dst)-len(dst) >= t.room*len(codes) {
		// Each code stores the 16-byte slot of its token (and the rest
		// of a longer one) at o and advances o by the token's length, at
		// most t.room: store k ends at most t.room(k+1) bytes past
		// len(dst), within the capacity just checked; that is what makes
		// the unchecked stores safe. The long branch is almost never
		// taken, so it costs a predicted compare.
		o := len(dst)
		p := unsafe.Pointer(unsafe.SliceData(dst))
		for _, c := range codes {
			*(*[16]byte)(unsafe.Add(p, o)) = t.short[c]
			l := int(t.n[c])
			if l > 16 {
				copy(unsafe.Slice((*byte)(unsafe.Add(p, o)), l), t.long[c])
			}
			o += l
		}
		return dst[:o]
	}
	for _, c := range codes {
		l := int(t.n[c])
		if l > 16 {
			dst = append(dst, t.long[c]...)
			continue
		}
		dst = append(dst, t.short[c][:l]...)
	}
	return dst
}

// entry parses the names entry at off: it returns the offset of its code
// bytes and of the next entry, or ok false when the entry runs past b or
// has a zero length.
func entry(b []byte, off int, big bool) (codes, next int, ok bool) {
	if off >= len(b) {
		return 0, 0, false
	}
	l := int(b[off])
	codes = off + 1
	if big && l&0x80 != 0 {
		if codes >= len(b) || b[codes]&0x80 != 0 {
			return 0, 0, false
		}
		l = l&0x7f | int(b[codes])<<7
		codes++
	}
	next = codes + l
	if l == 0 || l > maxCodes || next > len(b) {
		return 0, 0, false
	}
	return codes, next, true
}

// walk skips count entries from off and returns the offset after them, or
// -1 when an entry is malformed. sawBig reports a prefix with its high bit
// set (which the two length rules read differently).
func walk(b []byte, off, count int, big bool) (end int, sawBig bool) {
	for range count {
		if off < len(b) && b[off]&0x80 != 0 {
			sawBig = true
		}
		_, next, ok := entry(b, off, big)
		if !ok {
			return -1, sawBig
		}
		off = next
	}
	return off, sawBig
}

// tables is what both the whole and the lazy decoder read: located and
// validated tables with the token table, markers and raw address table in
// memory.
type tables struct {
	r   memory.Reader
	lay Layout
	bo  binary.ByteOrder
	tok *tokens
	n   int
	big bool

	markers  []uint32 // offsets in names of every 256th entry
	namesLen int      // bytes of names, exactly

	// Address table, read on demand, and how to decode it.
	addr    *addrTable
	enc     Encoding
	base    uint64
	tableVA uint64
	mask    uint64 // 0xffffffff on 32-bit kernels

	mu     sync.Mutex
	whole  []byte   // all of names when read
	blocks []*block // decoded blocks of 256 entries, filled on demand
}

type block struct {
	raw  []byte
	offs []uint32 // entry starts within raw, plus the end
}

// addrAt decodes the address of entry i. A part of the table that cannot
// be read decodes as zeros; the fault is kept in t.addr (see addrTable).
func (t *tables) addrAt(i int) uint64 {
	return decodeAddr(t.enc, t.addr.entry(i*t.addrWidth()), i, t.bo, t.lay.PtrSize, t.base, t.tableVA) & t.mask
}

// addrWidth is the size of an address table entry.
func (t *tables) addrWidth() int {
	if t.enc == Absolute {
		return t.lay.PtrSize
	}
	return 4
}

// decodeAddr decodes entry i, whose bytes start raw.
func decodeAddr(enc Encoding, raw []byte, i int, bo binary.ByteOrder, ptr int, base, tableVA uint64) uint64 {
	if enc == Absolute {
		if ptr == 8 {
			return bo.Uint64(raw)
		}
		return uint64(bo.Uint32(raw))
	}
	v := bo.Uint32(raw)
	switch enc {
	case BaseRelative:
		return base + uint64(v)
	case AbsolutePercpu:
		if int32(v) >= 0 {
			return uint64(v)
		}
		return base - 1 - uint64(int64(int32(v)))
	case PlaceRelative:
		return tableVA + 4*uint64(i) + uint64(int64(int32(v)))
	case Offsets32:
		return uint64(v)
	}
	return 0
}

// decodeWindow decodes len(out) consecutive address-table entries from raw,
// the first being entry first, as decodeAddr would one by one. The common
// little-endian 32-bit encodings run in a loop of their own, without an
// interface call per entry.
func decodeWindow(out []uint64, enc Encoding, raw []byte, first int, bo binary.ByteOrder, ptr int, base, tableVA uint64) {
	if bo == binary.ByteOrder(binary.LittleEndian) && enc != Absolute {
		raw = raw[:4*len(out)]
		switch enc {
		case BaseRelative:
			for j := range out {
				out[j] = base + uint64(binary.LittleEndian.Uint32(raw[4*j:]))
			}
			return
		case AbsolutePercpu:
			for j := range out {
				v := binary.LittleEndian.Uint32(raw[4*j:])
				if int32(v) >= 0 {
					out[j] = uint64(v)
				} else {
					out[j] = base - 1 - uint64(int64(int32(v)))
				}
			}
			return
		}
	}
	w := 4
	if enc == Absolute {
		w = ptr
	}
	for j := range out {
		out[j] = decodeAddr(enc, raw[w*j:], first+j, bo, ptr, base, tableVA)
	}
}

// addrChunk is how much of the address table is read at a time: a lookup
// reads the few chunks its search touches, not the whole table (650 KiB
// on a 6.12 kernel).
const addrChunk = 16 << 10

// addrTable is an address table read on demand, addrChunk bytes at a time,
// and kept. Entries (4 or 8 bytes) never straddle chunks. A chunk that
// cannot be read reads as zeros and its fault is kept, the first one only,
// so searches run in a straight line and their callers check err once.
type addrTable struct {
	r      memory.Reader
	va     uint64
	size   int
	chunks []atomic.Pointer[[]byte]

	mu  sync.Mutex
	err error
}

// newAddrTable describes size bytes at va; it reads nothing.
func newAddrTable(r memory.Reader, va, size uint64) (*addrTable, error) {
	if va+size < va {
		return nil, corrupt(va, size, "address table of %d bytes wraps the address space", size)
	}
	return &addrTable{r: r, va: va, size: int(size), chunks: make([]atomic.Pointer[[]byte], (size+addrChunk-1)/addrChunk)}, nil
}

// entry returns the table from byte off to the end of its chunk.
func (a *addrTable) entry(off int) []byte {
	k := off / addrChunk
	p := a.chunks[k].Load()
	if p == nil {
		p = a.fill(k)
	}
	return (*p)[off%addrChunk:]
}

func (a *addrTable) fill(k int) *[]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.chunks[k].Load(); p != nil {
		return p
	}
	start := k * addrChunk
	buf := make([]byte, min(addrChunk, a.size-start))
	at := a.va + uint64(start)
	if err := memory.ReadFull(a.r, buf, at); err != nil {
		clear(buf)
		if a.err == nil {
			a.err = fmt.Errorf("kallsyms: address table at %#x: %w", at, err)
		}
	}
	a.chunks[k].Store(&buf)
	return &buf
}

// readErr returns the first fault reading the table.
func (a *addrTable) readErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// blockCount is the number of 256-entry blocks.
func (t *tables) blockCount() int { return len(t.markers) }

// block returns block k of names, reading and walking it on first use.
func (t *tables) block(k int) (*block, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blocks == nil {
		t.blocks = make([]*block, len(t.markers))
	}
	if b := t.blocks[k]; b != nil {
		return b, nil
	}
	start := int(t.markers[k])
	end := t.namesLen
	if k+1 < len(t.markers) {
		end = int(t.markers[k+1])
	}
	var raw []byte
	if t.whole != nil {
		raw = t.whole[start:end]
	} else {
		raw = make([]byte, end-start)
		addr := t.lay.Names.Addr + uint64(start)
		if err := memory.ReadFull(t.r, raw, addr); err != nil {
			return nil, fmt.Errorf("kallsyms: names block %d at %#x: %w", k, addr, err)
		}
	}
	count := min(256, t.n-256*k)
	b := &block{raw: raw, offs: make([]uint32, count+1)}
	off := 0
	for j := range count {
		b.offs[j] = uint32(off)
		_, next, ok := entry(raw, off, t.big)
		if !ok {
			return nil, corrupt(t.lay.Names.Addr+uint64(start+off), uint64(256*k+j), "names entry %d is malformed", 256*k+j)
		}
		off = next
	}
	if off != len(raw) {
		return nil, corrupt(t.lay.Names.Addr+uint64(start+off), uint64(k), "names block %d does not end at the next marker", k)
	}
	b.offs[count] = uint32(off)
	t.blocks[k] = b
	return b, nil
}

// expandAt appends the expansion (type letter first) of entry i to dst.
func (t *tables) expandAt(dst []byte, i int) ([]byte, error) {
	b, err := t.block(i >> 8)
	if err != nil {
		return dst, err
	}
	codes, next, _ := entry(b.raw, int(b.offs[i&255]), t.big)
	return t.tok.expand(dst, b.raw[codes:next]), nil
}

// lowerBound returns the first index whose decoded address is >= a,
// assuming the table is sorted.
func (t *tables) lowerBound(a uint64) int {
	lo, hi := 0, t.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.addrAt(m) < a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func alignUp(v, a uint64) uint64   { return (v + a - 1) &^ (a - 1) }
func alignDown(v, a uint64) uint64 { return v &^ (a - 1) }
