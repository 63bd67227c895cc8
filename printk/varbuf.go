package printk

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// The buffer of kernels 3.5 to 5.9 (kernel/printk/printk.c before the
// lockless ring): log_buf points at log_buf_len bytes of records, each a
// struct printk_log header (struct log before 3.11) followed by text_len
// bytes of text and dict_len bytes of dictionary, len bytes in all,
// padded to 4 or 8 bytes. The oldest record is at log_first_idx, the slot
// for the next at log_next_idx; a header with len 0, or too little room
// left for one, sends the walk back to offset 0.
//
// Records carry no sequence number: it is counted from log_first_seq,
// which VMCOREINFO does not export (Options.Symbol finds it).
const maxLogBufLen = 1 << 31 // LOG_BUF_LEN_MAX

type varBuf struct {
	l                                             *Log
	bufAddr                                       uint64
	length                                        uint64
	first, next                                   uint64
	hdr                                           uint64 // SIZE(printk_log)
	tsOff, lenOff, textLenOff, dictLenOff, facOff uint64
	callerOff                                     uint64
	hasCaller                                     bool
	firstSeq                                      uint64
	seqKnown                                      bool
	legacyCont                                    bool // 3.5–4.8: print fragments by the previous record's flags
	win                                           *window
	hdrBuf, textBuf                               []byte
}

func openVarBuf(l *Log, info *vmcoreinfo.Info, opt Options) (*varBuf, error) {
	typ := "printk_log"
	if _, ok := info.Size(typ); !ok {
		if _, ok := info.Size("log"); ok {
			typ = "log" // 3.5–3.10
		}
	}
	ly := &layout{info: info}
	v := &varBuf{l: l}
	v.hdr = ly.size(typ, 256)
	v.tsOff = ly.offset(typ, "ts_nsec", v.hdr, 8)
	v.lenOff = ly.offset(typ, "len", v.hdr, 2)
	v.textLenOff = ly.offset(typ, "text_len", v.hdr, 2)
	// facility and the flags/level byte follow dict_len (u16) with no
	// VMCOREINFO line of their own.
	v.dictLenOff = ly.offset(typ, "dict_len", v.hdr, 4)
	v.facOff = v.dictLenOff + 2
	if _, ok := info.Offset(typ, "caller_id"); ok { // CONFIG_PRINTK_CALLER, 5.1+
		v.callerOff = ly.offset(typ, "caller_id", v.hdr, 4)
		v.hasCaller = true
	}
	syms, err := info.Require("log_buf", "log_buf_len", "log_first_idx", "log_next_idx")
	if err != nil {
		return nil, fmt.Errorf("printk: %w", err)
	}
	if ly.err != nil {
		return nil, ly.err
	}
	if v.bufAddr, err = l.t.ReadPointer(l.kmem, syms[0]); err != nil {
		return nil, fmt.Errorf("printk: reading log_buf at %#x: %w", syms[0], err)
	}
	var u [3]uint32
	for i, a := range syms[1:] {
		if u[i], err = memory.Uint32(l.kmem, l.bo, a); err != nil {
			return nil, fmt.Errorf("printk: reading %s at %#x: %w", []string{"log_buf_len", "log_first_idx", "log_next_idx"}[i], a, err)
		}
	}
	v.length, v.first, v.next = uint64(u[0]), uint64(u[1]), uint64(u[2])
	if v.length == 0 || v.length > maxLogBufLen || v.length < v.hdr {
		return nil, formatErr(syms[1], v.length, "log_buf_len %d: not a buffer of %d to 2^31 bytes", v.length, v.hdr)
	}
	if v.first >= v.length || v.next >= v.length {
		return nil, formatErr(syms[2], v.first, "log_first_idx %d or log_next_idx %d past the %d-byte buffer", v.first, v.next, v.length)
	}
	if v.bufAddr > ^uint64(0)-v.length {
		return nil, formatErr(syms[0], v.bufAddr, "a %d-byte log_buf passes the end of the address space", v.length)
	}
	if opt.Symbol != nil {
		if a, ok := opt.Symbol("log_first_seq"); ok {
			if s, err := memory.Uint64(l.kmem, l.bo, a); err == nil {
				v.firstSeq, v.seqKnown = s, true
			}
		}
	}
	maj, min := release(info)
	v.legacyCont = maj == 3 || (maj == 4 && min < 9)
	v.win = newWindow(l.kmem, v.bufAddr, v.length)
	v.hdrBuf = make([]byte, v.hdr)
	v.textBuf = make([]byte, 0, 1<<10)
	return v, nil
}

func (v *varBuf) describe() string {
	return fmt.Sprintf("variable-length records in a %d-byte log_buf at %#x, first %#x, next %#x",
		v.length, v.bufAddr, v.first, v.next)
}

// header is a decoded record header.
type header struct {
	ts                     uint64
	len, textLen, dictLen  uint64
	facility, level, flags uint8
	caller                 uint32
}

// readHeader reads the header at idx; ok is false when it is unreadable.
func (v *varBuf) readHeader(idx uint64) (header, error) {
	if err := v.win.read(v.hdrBuf, idx); err != nil {
		return header{}, err
	}
	b, bo := v.hdrBuf, v.l.bo
	h := header{
		ts:       bo.Uint64(b[v.tsOff:]),
		len:      uint64(bo.Uint16(b[v.lenOff:])),
		textLen:  uint64(bo.Uint16(b[v.textLenOff:])),
		dictLen:  uint64(bo.Uint16(b[v.dictLenOff:])),
		facility: b[v.facOff],
	}
	h.level, h.flags = levelFlags(b[v.facOff+1], bo)
	if v.hasCaller {
		h.caller = bo.Uint32(b[v.callerOff:])
	}
	return h, nil
}

// plausible reports whether h, at idx, is a header the kernel wrote: its
// length is what log_store computes for its text and dictionary (padded to
// 4 or 8), it ends by end, and it is no older than the record before.
func (v *varBuf) plausible(h header, idx, end, minTS uint64) bool {
	used := v.hdr + h.textLen + h.dictLen
	return h.len != 0 && (h.len == (used+3)&^3 || h.len == (used+7)&^7) &&
		h.len <= end-idx && h.ts >= minTS
}

func (v *varBuf) entries(yield func(Entry) bool) {
	if v.first == v.next {
		return // empty
	}
	idx := v.first
	wrapped := v.first < v.next // already in the segment that ends at next
	seq, seqKnown := v.firstSeq, v.seqKnown
	var prevFlags uint8
	var minTS uint64
	// Each step advances idx by at least 4 bytes within one of at most two
	// segments, so the walk is bounded by the buffer's length.
	for idx != v.next {
		end := v.length
		if wrapped {
			end = v.next
		}
		if idx > end || (!wrapped && end-idx < v.hdr) {
			if wrapped {
				v.gap(yield, seq, seqKnown, v.bufAddr+idx, formatErr(v.bufAddr+idx, idx, "record chain passes log_next_idx %#x", v.next))
				return
			}
			idx, wrapped = 0, true // no room for a header: the kernel wrapped
			continue
		}
		h, err := v.readHeader(idx)
		if err == nil && h.len == 0 && !wrapped {
			idx, wrapped = 0, true // the end-of-buffer marker
			continue
		}
		if err == nil && !v.plausible(h, idx, end, minTS) {
			err = formatErr(v.bufAddr+idx, h.len, "record at log_buf offset %#x: len %d does not fit text_len %d and dict_len %d", idx, h.len, h.textLen, h.dictLen)
		}
		var rec Record
		if err == nil {
			rec, err = v.record(h, idx)
		}
		if err != nil {
			if !v.gap(yield, seq, seqKnown, v.bufAddr+idx, err) {
				return
			}
			seqKnown, prevFlags = false, 0
			var ok bool
			idx, ok = v.resync(idx, end, minTS)
			if !ok {
				if wrapped {
					return
				}
				idx, wrapped = 0, true // offset 0 always starts a record
			}
			continue
		}
		rec.Seq, rec.SeqKnown = seq, seqKnown
		seq++
		if v.legacyCont {
			rec.NoPrefix = prevFlags&FlagCont != 0 && rec.Flags&FlagPrefix == 0
			if rec.Flags&FlagCont != 0 {
				if prevFlags&FlagCont != 0 && prevFlags&FlagNewline == 0 {
					rec.NoPrefix = true
				}
				rec.NoNewline = rec.Flags&FlagNewline == 0
			}
			prevFlags = rec.Flags
		}
		minTS = h.ts
		if !yield(Entry{Record: rec}) {
			return
		}
		idx += h.len
	}
}

func (v *varBuf) gap(yield func(Entry) bool, seq uint64, seqKnown bool, addr uint64, err error) bool {
	return yield(Entry{Gap: &Gap{FirstSeq: seq, SeqKnown: seqKnown, Addr: addr, Err: err}})
}

func (v *varBuf) record(h header, idx uint64) (Record, error) {
	rec := Record{
		TimeNS: h.ts, Level: h.level, Facility: h.facility, Flags: h.flags,
		CallerID: h.caller, HasCaller: v.hasCaller,
	}
	n := h.textLen + h.dictLen // at most 2 × 64 KiB
	if uint64(cap(v.textBuf)) < n {
		v.textBuf = make([]byte, n)
	}
	b := v.textBuf[:n]
	if err := v.win.read(b, idx+v.hdr); err != nil {
		return Record{}, err
	}
	rec.Text = string(b[:h.textLen])
	if h.dictLen > 0 {
		// The dictionary's pairs are NUL-separated in the buffer; /dev/kmsg
		// prints one a line.
		d := append([]byte(nil), b[h.textLen:]...)
		for i, c := range d {
			if c == 0 {
				d[i] = '\n'
			}
		}
		rec.Dict = string(d)
	}
	return rec, nil
}

// resync finds the next record after a bad or unreadable one at idx,
// before end: the first 4-byte-aligned offset holding a plausible header
// that is followed by another plausible header, the end-of-buffer marker,
// or end itself.
func (v *varBuf) resync(idx, end, minTS uint64) (uint64, bool) {
	for c := (idx + 4) &^ 3; c < end && end-c >= v.hdr; c += 4 {
		h, err := v.readHeader(c)
		if err != nil {
			c = (c+faultGrain)&^(faultGrain-1) - 4 // skip the unreadable page
			continue
		}
		if !v.plausible(h, c, end, minTS) {
			continue
		}
		n := c + h.len
		if n == end || n == v.next {
			return c, true
		}
		if end-n < v.hdr {
			return c, true // no room for another header: the kernel wrapped here
		}
		h2, err := v.readHeader(n)
		if err == nil && (h2.len == 0 || v.plausible(h2, n, end, h.ts)) {
			return c, true
		}
	}
	return 0, false
}
