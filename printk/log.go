package printk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Format names the layout of the kernel log.
type Format int

const (
	// Lockless is the lockless ring buffer of kernels 5.10 and later
	// (kernel/printk/printk_ringbuffer.c).
	Lockless Format = iota + 1
	// Variable is the buffer of variable-length records of kernels 3.5 to
	// 5.9 (struct printk_log, named struct log before 3.11).
	Variable
)

func (f Format) String() string {
	switch f {
	case Lockless:
		return "lockless ring buffer (5.10+)"
	case Variable:
		return "variable-length records (3.5-5.9)"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// ErrIncomplete means a record was being written or recycled when the dump
// was taken (its descriptor reserved, not committed, or already reusable):
// the kernel's own readers skip such records too.
var ErrIncomplete = errors.New("printk: record not committed")

// Options adjust Open.
type Options struct {
	// Target is the kernel's machine; its ByteOrder and PtrSize are
	// required (see memory.Target).
	Target memory.Target
	// Symbol, when set, looks up a kernel symbol's address. Kernels before
	// 5.10 do not export log_first_seq in VMCOREINFO; with it, the older
	// buffer's records get their sequence numbers.
	Symbol func(name string) (uint64, bool)
}

// Log is the kernel log of a dump. Open reads its control data; Entries
// walks the records.
type Log struct {
	format Format
	kmem   memory.Reader
	t      memory.Target
	bo     binary.ByteOrder // t's
	ptr    int              // t's
	ring   *ring
	vbuf   *varBuf
}

// Open finds the kernel log VMCOREINFO describes and reads its control
// data (the ring's head and tail, or the buffer's first and next index).
//
// Errors wrap ErrMissingInfo when VMCOREINFO describes neither layout,
// ErrCorrupt (a *FormatError) when the control data is impossible (a ring
// of more than 2^31 bytes, descriptors outside the address space), the
// *memory.FaultError of a control read that failed, or
// memory.ErrUnknownTarget when opt.Target lacks the byte order or pointer
// size.
func Open(kmem memory.Reader, info *vmcoreinfo.Info, opt Options) (*Log, error) {
	if info == nil {
		return nil, fmt.Errorf("printk: no VMCOREINFO: %w", ErrMissingInfo)
	}
	if err := opt.Target.Check(); err != nil {
		return nil, fmt.Errorf("printk: %w", err)
	}
	l := &Log{kmem: kmem, t: opt.Target, bo: opt.Target.ByteOrder, ptr: opt.Target.PtrSize}
	if _, ok := info.Symbol("prb"); ok {
		r, err := openRing(l, info)
		if err != nil {
			return nil, err
		}
		l.format, l.ring = Lockless, r
		return l, nil
	}
	if _, ok := info.Symbol("log_buf"); ok {
		v, err := openVarBuf(l, info, opt)
		if err != nil {
			return nil, err
		}
		l.format, l.vbuf = Variable, v
		return l, nil
	}
	return nil, fmt.Errorf("printk: VMCOREINFO has neither SYMBOL(prb) nor SYMBOL(log_buf): %w", ErrMissingInfo)
}

// Format returns the layout of the log.
func (l *Log) Format() Format { return l.format }

// Describe says in one line where the log is and how large.
func (l *Log) Describe() string {
	if l.ring != nil {
		return l.ring.describe()
	}
	return l.vbuf.describe()
}

// Entries walks the log oldest first, yielding each record, and a Gap
// where records could not be read; the walk goes on past gaps. Its work is
// bounded by the ring's descriptor count (at most 2^26) or the buffer's
// length (at most 2^31 bytes), whatever the descriptors say.
func (l *Log) Entries() iter.Seq[Entry] {
	if l.ring != nil {
		return l.ring.entries
	}
	return l.vbuf.entries
}

// layout collects VMCOREINFO sizes and offsets, remembering the first one
// missing or out of range.
type layout struct {
	info *vmcoreinfo.Info
	err  error
}

func (ly *layout) size(name string, max uint64) uint64 {
	v, ok := ly.info.Size(name)
	if !ok {
		ly.fail(fmt.Errorf("printk: VMCOREINFO lacks SIZE(%s): %w", name, ErrMissingInfo))
		return 0
	}
	if v == 0 || v > max {
		ly.fail(formatErr(0, v, "SIZE(%s) is %d, not between 1 and %d", name, v, max))
		return 0
	}
	return v
}

// offset returns OFFSET(typ.field), which must leave room for n bytes in a
// struct of size bytes.
func (ly *layout) offset(typ, field string, size, n uint64) uint64 {
	v, ok := ly.info.Offset(typ, field)
	if !ok {
		ly.fail(fmt.Errorf("printk: VMCOREINFO lacks OFFSET(%s.%s): %w", typ, field, ErrMissingInfo))
		return 0
	}
	if size != 0 && (v > size || size-v < n) {
		ly.fail(formatErr(0, v, "OFFSET(%s.%s) is %d: a %d-byte field does not fit in %d bytes", typ, field, v, n, size))
		return 0
	}
	return v
}

func (ly *layout) fail(err error) {
	if ly.err == nil {
		ly.err = err
	}
}

// release returns the major and minor version of OSRELEASE, 0, 0 when it
// does not parse.
func release(info *vmcoreinfo.Info) (int, int) {
	s := info.OSRelease()
	maj, rest, _ := strings.Cut(s, ".")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return a, b
}

// cstring returns b up to its first NUL.
func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// levelFlags splits the byte holding "u8 flags:5; u8 level:3;". GCC
// allocates bit-fields from the least significant bit on little-endian
// targets and from the most significant bit on big-endian ones.
func levelFlags(b byte, bo binary.ByteOrder) (level, flags uint8) {
	if bo == binary.BigEndian {
		return b & 7, b >> 3
	}
	return b >> 5, b & 0x1f
}
