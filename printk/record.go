package printk

import (
	"fmt"
	"strconv"
)

// Record is one entry of the kernel log.
type Record struct {
	// Seq is the record's sequence number. In the lockless ring it is
	// stored with the record; in the older buffer it is counted from
	// log_first_seq, and SeqKnown is false when that was not available or a
	// gap of unknown size came before the record.
	Seq      uint64
	SeqKnown bool
	// TimeNS is the timestamp in nanoseconds since boot (local_clock).
	TimeNS uint64
	// Level is the syslog level (0 emerg … 7 debug), Facility the syslog
	// facility (0 kernel, 1 user for messages written to /dev/kmsg).
	Level    uint8
	Facility uint8
	// Flags are the kernel's internal record flags (LOG_NEWLINE, LOG_CONT …).
	Flags uint8
	// CallerID is the task id, or with the top bit set the CPU, that wrote
	// the record; HasCaller is false where the kernel did not store one
	// (the older buffer without CONFIG_PRINTK_CALLER).
	CallerID  uint32
	HasCaller bool
	// Text is the message without its final newline; it may hold more
	// lines, separated by '\n'.
	Text string
	// Dict holds the record's key=value pairs, one a line: the older
	// buffer's dictionary, or SUBSYSTEM= and DEVICE= from the lockless
	// ring's dev_printk_info.
	Dict string
	// Truncated means the stored text is shorter than the record says
	// (text_len past the data block or the end of the buffer).
	Truncated bool
	// NoPrefix and NoNewline say how kernels 3.5–4.8 printed continuation
	// fragments: without the timestamp prefix, the previous fragment's line
	// going on; without a newline, the next fragment continuing this line.
	// Later kernels join fragments before storing them, and both are false.
	NoPrefix, NoNewline bool
}

// Record flags (enum log_flags / printk_info_flags).
const (
	FlagNoCons  = 1 // LOG_NOCONS: not printed to consoles
	FlagNewline = 2 // LOG_NEWLINE: the text ended with a newline
	FlagPrefix  = 4 // LOG_PREFIX: the text started with a prefix (3.5–4.8)
	FlagCont    = 8 // LOG_CONT: a fragment of a continuation line
)

// Caller returns the caller as the kernel prints it with
// CONFIG_PRINTK_CALLER: "T<pid>" for a task, "C<cpu>" for a CPU in
// interrupt context; "" without a caller id.
func (r *Record) Caller() string {
	if !r.HasCaller {
		return ""
	}
	if r.CallerID&0x80000000 != 0 {
		return "C" + strconv.FormatUint(uint64(r.CallerID&^0x80000000), 10)
	}
	return "T" + strconv.FormatUint(uint64(r.CallerID), 10)
}

// Timestamp formats TimeNS as the kernel's prefix does: "%5lu.%06lu".
func (r *Record) Timestamp() string {
	return fmt.Sprintf("%5d.%06d", r.TimeNS/1e9, r.TimeNS%1e9/1e3)
}

// Gap stands where records could not be read: their descriptor or text
// lies in a page the dump does not hold, or their control data is
// inconsistent. The records around it are still returned.
type Gap struct {
	// FirstSeq is the sequence number of the first record lost, when known
	// (SeqKnown); Count the records lost, 0 when unknown.
	FirstSeq uint64
	SeqKnown bool
	Count    uint64
	// Addr is where the first failed read or bad value was; Err why, an
	// error wrapping memory.ErrNotSaved, ErrCorrupt or another fault.
	Addr uint64
	Err  error
}

func (g *Gap) Error() string {
	n := "records"
	switch {
	case g.Count == 1:
		n = "1 record"
	case g.Count > 1:
		n = fmt.Sprintf("%d records", g.Count)
	}
	if g.SeqKnown {
		n += fmt.Sprintf(" from seq %d", g.FirstSeq)
	}
	return fmt.Sprintf("printk: %s lost: %v", n, g.Err)
}

func (g *Gap) Unwrap() error { return g.Err }

// Entry is one step of the walk: a record, or a gap (Gap != nil, Record
// zero).
type Entry struct {
	Record Record
	Gap    *Gap
}
