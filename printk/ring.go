package printk

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Limits of the lockless ring. The kernel caps log_buf_len at
// LOG_BUF_LEN_MAX = 2^31 bytes and keeps one descriptor per 2^PRB_AVGBITS
// = 32 bytes of text, so no real ring has more than 2^26 descriptors.
const (
	maxSizeBits  = 31
	maxCountBits = 26
	maxStruct    = 4096 // no descriptor, info or ring struct is near this
)

// Descriptor states: the top two bits of state_var (enum desc_state).
const (
	descReserved  = 0
	descCommitted = 1
	descFinalized = 2
	descReusable  = 3
)

type ring struct {
	l *Log

	addr              uint64 // the struct printk_ringbuffer
	countBits         uint
	count             uint64
	sizeBits          uint
	size              uint64
	descsAddr         uint64
	infosAddr         uint64
	dataAddr          uint64
	headID, tailID    uint64
	idMask            uint64 // DESC_ID_MASK
	wordMask          uint64 // unsigned long arithmetic wraps here
	descs, infos, txt *window

	descSize, stateOff, beginOff, nextOff          uint64
	infoSize, seqOff, tsOff, textLenOff, callerOff uint64
	hasDev                                         bool
	subsysOff, subsysLen, deviceOff, deviceLen     uint64
	descBuf, infoBuf, textBuf                      []byte
}

func openRing(l *Log, info *vmcoreinfo.Info) (*ring, error) {
	ly := &layout{info: info}
	ptr := uint64(l.ptr)
	rbSize := ly.size("printk_ringbuffer", maxStruct)
	descRing := ly.offset("printk_ringbuffer", "desc_ring", rbSize, 0)
	dataRing := ly.offset("printk_ringbuffer", "text_data_ring", rbSize, 0)
	drSize := ly.size("prb_desc_ring", maxStruct)
	countBitsOff := ly.offset("prb_desc_ring", "count_bits", drSize, 4)
	descsOff := ly.offset("prb_desc_ring", "descs", drSize, ptr)
	infosOff := ly.offset("prb_desc_ring", "infos", drSize, ptr)
	headOff := ly.offset("prb_desc_ring", "head_id", drSize, ptr)
	tailOff := ly.offset("prb_desc_ring", "tail_id", drSize, ptr)
	dataSize := ly.size("prb_data_ring", maxStruct)
	sizeBitsOff := ly.offset("prb_data_ring", "size_bits", dataSize, 4)
	dataOff := ly.offset("prb_data_ring", "data", dataSize, ptr)
	r := &ring{l: l}
	r.descSize = ly.size("prb_desc", maxStruct)
	r.stateOff = ly.offset("prb_desc", "state_var", r.descSize, ptr)
	lpos := ly.offset("prb_desc", "text_blk_lpos", r.descSize, 0)
	lposSize := ly.size("prb_data_blk_lpos", maxStruct)
	begin := ly.offset("prb_data_blk_lpos", "begin", lposSize, ptr)
	next := ly.offset("prb_data_blk_lpos", "next", lposSize, ptr)
	if ly.err == nil && (lpos > r.descSize || r.descSize-lpos < lposSize) {
		ly.fail(formatErr(0, lpos, "OFFSET(prb_desc.text_blk_lpos) leaves no room for a %d-byte prb_data_blk_lpos", lposSize))
	}
	r.beginOff, r.nextOff = lpos+begin, lpos+next
	r.infoSize = ly.size("printk_info", maxStruct)
	r.seqOff = ly.offset("printk_info", "seq", r.infoSize, 8)
	r.tsOff = ly.offset("printk_info", "ts_nsec", r.infoSize, 8)
	// facility and the flags/level byte follow text_len (u16) with no
	// VMCOREINFO line of their own.
	r.textLenOff = ly.offset("printk_info", "text_len", r.infoSize, 4)
	r.callerOff = ly.offset("printk_info", "caller_id", r.infoSize, 4)
	if ly.err == nil && (drSize > rbSize-descRing || dataSize > rbSize-dataRing) {
		ly.fail(formatErr(0, rbSize, "SIZE(printk_ringbuffer) %d cannot hold its desc_ring and text_data_ring", rbSize))
	}
	if ly.err != nil {
		return nil, ly.err
	}
	r.devInfo(info)

	pp, _ := info.Symbol("prb")
	var err error
	r.addr, err = l.t.ReadPointer(l.kmem, pp)
	if err != nil {
		return nil, fmt.Errorf("printk: reading prb at %#x: %w", pp, err)
	}
	rb := make([]byte, rbSize)
	if err := memory.ReadFull(l.kmem, rb, r.addr); err != nil {
		return nil, fmt.Errorf("printk: reading the printk_ringbuffer at %#x: %w", r.addr, err)
	}
	dr, tr := rb[descRing:], rb[dataRing:]
	cb := uint64(l.bo.Uint32(dr[countBitsOff:]))
	sb := uint64(l.bo.Uint32(tr[sizeBitsOff:]))
	if cb > maxCountBits {
		return nil, formatErr(r.addr, cb, "desc_ring.count_bits %d: more than 2^%d descriptors", cb, maxCountBits)
	}
	if sb > maxSizeBits || sb < 3 {
		return nil, formatErr(r.addr, sb, "text_data_ring.size_bits %d: not a ring of 2^3 to 2^%d bytes", sb, maxSizeBits)
	}
	r.countBits, r.count = uint(cb), 1<<cb
	r.sizeBits, r.size = uint(sb), 1<<sb
	r.descsAddr = l.t.Pointer(dr[descsOff:])
	r.infosAddr = l.t.Pointer(dr[infosOff:])
	r.dataAddr = l.t.Pointer(tr[dataOff:])
	bits := uint(8 * l.ptr)
	r.idMask = (1<<(bits-2) - 1)
	r.wordMask = 1<<(bits-1)<<1 - 1
	r.headID = l.t.Pointer(dr[headOff:]) & r.idMask
	r.tailID = l.t.Pointer(dr[tailOff:]) & r.idMask
	for _, a := range []struct {
		what       string
		addr, size uint64
	}{
		{"descs", r.descsAddr, r.count * r.descSize},
		{"infos", r.infosAddr, r.count * r.infoSize},
		{"text data", r.dataAddr, r.size},
	} {
		if a.addr > ^uint64(0)-a.size {
			return nil, formatErr(r.addr, a.addr, "the %s array of %d bytes passes the end of the address space", a.what, a.size)
		}
	}
	r.descs = newWindow(l.kmem, r.descsAddr, r.count*r.descSize)
	r.infos = newWindow(l.kmem, r.infosAddr, r.count*r.infoSize)
	r.txt = newWindow(l.kmem, r.dataAddr, r.size)
	r.descBuf = make([]byte, r.descSize)
	r.infoBuf = make([]byte, r.infoSize)
	r.textBuf = make([]byte, 1<<16) // text_len is a u16
	return r, nil
}

// devInfo reads where dev_printk_info's subsystem and device strings are;
// kernels without them (none released, but VMCOREINFO may omit the lines)
// give records no dictionary.
func (r *ring) devInfo(info *vmcoreinfo.Info) {
	dev, ok1 := info.Offset("printk_info", "dev_info")
	ss, ok2 := info.Offset("dev_printk_info", "subsystem")
	sl, ok3 := info.Length("printk_info_subsystem")
	ds, ok4 := info.Offset("dev_printk_info", "device")
	dl, ok5 := info.Length("printk_info_device")
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return
	}
	fits := func(off, n uint64) bool { return off <= r.infoSize && r.infoSize-off >= n }
	if dev > r.infoSize || !fits(dev+ss, sl) || !fits(dev+ds, dl) {
		return
	}
	r.hasDev = true
	r.subsysOff, r.subsysLen, r.deviceOff, r.deviceLen = dev+ss, sl, dev+ds, dl
}

func (r *ring) describe() string {
	return fmt.Sprintf("lockless ring buffer at %#x: %d descriptors at %#x, %d-byte text ring at %#x, ids %#x..%#x",
		r.addr, r.count, r.descsAddr, r.size, r.dataAddr, r.tailID, r.headID)
}

// entries walks ids from tail_id to head_id, as crash and makedumpfile do.
func (r *ring) entries(yield func(Entry) bool) {
	n := (r.headID-r.tailID)&r.idMask + 1
	tail := r.tailID
	var pending *Gap
	if n > r.count {
		// The tail is impossible: walk the last count ids before the head.
		pending = &Gap{Addr: r.addr, Err: formatErr(r.addr, r.tailID,
			"tail_id is %d ids behind head_id %#x, more than the %d descriptors", n-1, r.headID, r.count)}
		tail = (r.headID - r.count + 1) & r.idMask
		n = r.count
	}
	var prevSeq uint64
	havePrev := false
	lost := uint64(0)
	for i := uint64(0); i < n; i++ {
		id := (tail + i) & r.idMask
		rec, gap := r.record(id)
		if gap != nil {
			if !havePrev && pending == nil && gap.Err == errReusable {
				continue // already recycled: before the log's real start
			}
			if pending == nil {
				pending = gap
				if havePrev {
					pending.FirstSeq, pending.SeqKnown = prevSeq+1, true
				}
			}
			lost++
			continue
		}
		if pending != nil {
			// One id is one record: the gap's sequence numbers are
			// those before this record's.
			pending.Count = lost
			if pending.SeqKnown && rec.Seq > pending.FirstSeq {
				pending.Count = rec.Seq - pending.FirstSeq
			} else if !pending.SeqKnown && rec.Seq >= lost {
				pending.FirstSeq, pending.SeqKnown = rec.Seq-lost, true
			}
			if !yield(Entry{Gap: pending}) {
				return
			}
			pending, lost = nil, 0
		}
		prevSeq, havePrev = rec.Seq, true
		if !yield(Entry{Record: rec}) {
			return
		}
	}
	if pending != nil {
		pending.Count = lost
		yield(Entry{Gap: pending})
	}
}

// errReusable marks a descriptor already recycled; at the start of the walk
// it is skipped quietly (the kernel's tail may still point at it).
var errReusable = fmt.Errorf("descriptor reusable, its text recycled: %w", ErrIncomplete)

// record reads the record of descriptor id.
func (r *ring) record(id uint64) (Record, *Gap) {
	l := r.l
	idx := id & (r.count - 1)
	dAddr := r.descsAddr + idx*r.descSize
	if err := r.descs.read(r.descBuf, idx*r.descSize); err != nil {
		return Record{}, &Gap{Addr: dAddr, Err: fmt.Errorf("descriptor %d: %w", idx, err)}
	}
	sv := l.t.Pointer(r.descBuf[r.stateOff:])
	state := sv >> (8*l.ptr - 2)
	if got := sv & r.idMask; got != id {
		return Record{}, &Gap{Addr: dAddr, Err: formatErr(dAddr, got, "descriptor %d holds id %#x, not %#x", idx, got, id)}
	}
	switch state {
	case descCommitted, descFinalized:
	case descReusable:
		return Record{}, &Gap{Addr: dAddr, Err: errReusable}
	default:
		return Record{}, &Gap{Addr: dAddr, Err: fmt.Errorf("descriptor %d reserved, being written: %w", idx, ErrIncomplete)}
	}
	begin, next := l.t.Pointer(r.descBuf[r.beginOff:]), l.t.Pointer(r.descBuf[r.nextOff:])

	iAddr := r.infosAddr + idx*r.infoSize
	if err := r.infos.read(r.infoBuf, idx*r.infoSize); err != nil {
		return Record{}, &Gap{Addr: iAddr, Err: fmt.Errorf("printk_info %d: %w", idx, err)}
	}
	ib := r.infoBuf
	rec := Record{
		Seq:       l.bo.Uint64(ib[r.seqOff:]),
		SeqKnown:  true,
		TimeNS:    l.bo.Uint64(ib[r.tsOff:]),
		Facility:  ib[r.textLenOff+2],
		CallerID:  l.bo.Uint32(ib[r.callerOff:]),
		HasCaller: true,
	}
	rec.Level, rec.Flags = levelFlags(ib[r.textLenOff+3], l.bo)
	if rec.Seq&(r.count-1) != idx {
		return Record{}, &Gap{Addr: iAddr, Err: formatErr(iAddr, rec.Seq, "printk_info %d holds seq %d, which belongs to descriptor %d", idx, rec.Seq, rec.Seq&(r.count-1))}
	}
	if r.hasDev {
		rec.Dict = devDict(cstring(ib[r.subsysOff:r.subsysOff+r.subsysLen]), cstring(ib[r.deviceOff:r.deviceOff+r.deviceLen]))
	}
	textLen := uint64(l.bo.Uint16(ib[r.textLenOff:]))

	// The text block, as the kernel's get_data finds it.
	if begin&1 != 0 { // a data-less block
		if textLen == 0 {
			return rec, nil // an empty line
		}
		return Record{}, &Gap{Addr: dAddr, Err: fmt.Errorf("record seq %d: the kernel stored no text (the text ring was full): %w", rec.Seq, ErrIncomplete)}
	}
	var off, dsize uint64
	ptr := uint64(l.ptr)
	switch {
	case begin>>r.sizeBits == next>>r.sizeBits && begin < next:
		off, dsize = begin&(r.size-1), next-begin
	case ((begin+r.size)&r.wordMask)>>r.sizeBits == next>>r.sizeBits:
		off, dsize = 0, next&(r.size-1) // wrapped: the block is at the ring's start
	default:
		return Record{}, &Gap{Addr: dAddr, Err: formatErr(dAddr, begin, "record seq %d: text block [%#x, %#x) is not a block of a %d-byte ring", rec.Seq, begin, next, r.size)}
	}
	if begin%ptr != 0 || next%ptr != 0 || dsize < ptr {
		return Record{}, &Gap{Addr: dAddr, Err: formatErr(dAddr, begin, "record seq %d: text block [%#x, %#x) misaligned or without room for its id", rec.Seq, begin, next)}
	}
	var idb [8]byte
	bAddr := r.dataAddr + off
	if err := r.txt.read(idb[:ptr], off); err != nil {
		return Record{}, &Gap{Addr: bAddr, Err: fmt.Errorf("record seq %d: text: %w", rec.Seq, err)}
	}
	if got := l.t.Pointer(idb[:]) & r.idMask; got != id {
		return Record{}, &Gap{Addr: bAddr, Err: formatErr(bAddr, got, "record seq %d: text block at ring offset %#x holds id %#x, not %#x (overwritten)", rec.Seq, off, got, id)}
	}
	dsize -= ptr
	if textLen > dsize {
		textLen, rec.Truncated = dsize, true
	}
	text := r.textBuf[:textLen]
	if err := r.txt.read(text, off+ptr); err != nil {
		return Record{}, &Gap{Addr: bAddr, Err: fmt.Errorf("record seq %d: text: %w", rec.Seq, err)}
	}
	rec.Text = string(text)
	return rec, nil
}

// devDict is the dictionary /dev/kmsg prints for a record's device info.
func devDict(subsystem, device string) string {
	s := ""
	if subsystem != "" {
		s = "SUBSYSTEM=" + subsystem
	}
	if device != "" {
		if s != "" {
			s += "\n"
		}
		s += "DEVICE=" + device
	}
	return s
}
