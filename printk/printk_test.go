package printk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func collect(t *testing.T, l *Log) ([]Record, []*Gap, []Entry) {
	t.Helper()
	var recs []Record
	var gaps []*Gap
	var all []Entry
	for e := range l.Entries() {
		all = append(all, e)
		if e.Gap != nil {
			gaps = append(gaps, e.Gap)
			continue
		}
		recs = append(recs, e.Record)
	}
	return recs, gaps, all
}

func textRec(i int) rec {
	return rec{ts: uint64(i)*1_000_123 + 5, level: uint8(i % 8), facility: uint8(i % 3), caller: uint32(100 + i),
		text: fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%37))}
}

// le64 is the target of the worlds built without naming one.
var le64 = memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}

func TestRingSmall(t *testing.T) {
	for _, tc := range []struct {
		name string
		bo   binary.ByteOrder
		ptr  int
	}{{"le64", binary.LittleEndian, 8}, {"be64", binary.BigEndian, 8}, {"le32", binary.LittleEndian, 4}, {"be32", binary.BigEndian, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newRingWorld(tc.bo, tc.ptr, 4, 10)
			in := []rec{
				{ts: 1234567, level: 6, caller: 1, text: "Linux version 6.12.0"},
				{ts: 2000000000, level: 3, facility: 0, caller: 0x80000002, text: "usb 1-1: new device", subsystem: "usb", device: "c189:1"},
				{ts: 3000000001, level: 4, caller: 7},                  // an empty line
				{ts: 3100000000, level: 0, caller: 8, text: "a\nb\nc"}, // more lines
			}
			for _, x := range in {
				w.add(x)
			}
			require.Equal(t, uint64(0), w.finish())
			l, err := Open(w.mem, w.info("6.12.0"), Options{Target: memory.Target{ByteOrder: tc.bo, PtrSize: tc.ptr}})
			require.NoError(t, err)
			assert.Equal(t, Lockless, l.Format())
			recs, gaps, _ := collect(t, l)
			require.Empty(t, gaps)
			require.Len(t, recs, len(in))
			for i, r := range recs {
				assert.Equal(t, uint64(i), r.Seq)
				assert.True(t, r.SeqKnown)
				assert.Equal(t, in[i].ts, r.TimeNS)
				assert.Equal(t, in[i].level, r.Level)
				assert.Equal(t, in[i].facility, r.Facility)
				assert.Equal(t, in[i].text, r.Text)
				assert.Equal(t, in[i].caller, r.CallerID)
			}
			assert.Equal(t, "SUBSYSTEM=usb\nDEVICE=c189:1", recs[1].Dict)
			assert.Equal(t, "C2", recs[1].Caller())
			assert.Equal(t, "T1", recs[0].Caller())
			assert.Equal(t, "    0.001234", recs[0].Timestamp())
			assert.Equal(t, "    3.000000", recs[2].Timestamp())
		})
	}
}

// TestRingWrapped writes many times what the ring holds: both the
// descriptor ring and the text ring wrap, the walk returns exactly the
// surviving records in order, including blocks stored at the ring's start
// because they would have crossed its end.
func TestRingWrapped(t *testing.T) {
	for _, ptr := range []int{8, 4} {
		t.Run(fmt.Sprint(ptr), func(t *testing.T) {
			w := newRingWorld(binary.LittleEndian, ptr, 7, 12)
			const n = 1000
			for i := range n {
				w.add(textRec(i))
			}
			tail := w.finish()
			l, err := Open(w.mem, w.info("6.1.0"), Options{Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: ptr}})
			require.NoError(t, err)
			recs, gaps, _ := collect(t, l)
			require.Empty(t, gaps)
			require.Equal(t, n-int(tail), len(recs))
			wrappedBlocks := 0
			for i, r := range recs {
				want := textRec(int(tail) + i)
				require.Equal(t, tail+uint64(i), r.Seq)
				require.Equal(t, want.text, r.Text)
				require.Equal(t, want.ts, r.TimeNS)
				if b := w.begins[int(tail)+i]; b>>12 != w.nexts[int(tail)+i]>>12 {
					wrappedBlocks++
				}
			}
			assert.Positive(t, wrappedBlocks, "no record was stored at the ring's start")
		})
	}
}

// TestRingFilteredPage drops one page of the text ring and one of the
// descriptors: the records touching them become gaps with their count, and
// every other record is still returned.
func TestRingFilteredPage(t *testing.T) {
	w := newRingWorld(binary.LittleEndian, 8, 8, 14)
	for i := range 200 {
		w.add(textRec(i))
	}
	tail := w.finish()
	require.Equal(t, uint64(0), tail)
	w.mem.drop(w.data)           // the text of the first records
	w.mem.drop(w.descs + 0x1000) // descriptors 171 to 255
	l, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
	require.NoError(t, err)
	recs, gaps, all := collect(t, l)
	require.Len(t, gaps, 2)
	lost := uint64(0)
	for _, g := range gaps {
		assert.True(t, errors.Is(g.Err, memory.ErrNotSaved), g.Err)
		assert.True(t, g.SeqKnown)
		assert.Positive(t, g.Count)
		lost += g.Count
	}
	assert.Equal(t, 200, len(recs)+int(lost))
	// Sequence numbers run on across each gap.
	next := uint64(0)
	for _, e := range all {
		if e.Gap != nil {
			assert.Equal(t, next, e.Gap.FirstSeq)
			next += e.Gap.Count
			continue
		}
		assert.Equal(t, next, e.Record.Seq)
		assert.Equal(t, textRec(int(next)).text, e.Record.Text)
		next++
	}
	assert.Equal(t, uint64(200), next)
}

func TestRingHostile(t *testing.T) {
	build := func() *ringWorld {
		w := newRingWorld(binary.LittleEndian, 8, 4, 10)
		for i := range 10 {
			w.add(textRec(i))
		}
		w.finish()
		return w
	}
	p := uint64(8)
	t.Run("size_bits 40", func(t *testing.T) {
		w := build()
		w.u32(w.rb+5*p, 40)
		_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrCorrupt)
		var fe *FormatError
		require.ErrorAs(t, err, &fe)
	})
	t.Run("count_bits 60", func(t *testing.T) {
		w := build()
		w.u32(w.rb, 60)
		_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("descs at the top of the address space", func(t *testing.T) {
		w := build()
		w.word(w.rb+p, ^uint64(0)-10)
		_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("tail far behind head", func(t *testing.T) {
		w := build()
		w.word(w.rb+4*p, (w.ids[9]-1000)&w.idMask)
		l, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.NotEmpty(t, gaps)
		assert.ErrorIs(t, gaps[0].Err, ErrCorrupt)
		require.Len(t, recs, 10) // the 16 ids before the head hold all 10
	})
	t.Run("text_len past the block", func(t *testing.T) {
		w := build()
		idx := w.ids[3] & 15
		w.u16(w.infos+idx*w.infoSize+16, 60000)
		l, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.Empty(t, gaps)
		require.Len(t, recs, 10)
		assert.True(t, recs[3].Truncated)
		assert.True(t, strings.HasPrefix(recs[3].Text, textRec(3).text))
	})
	t.Run("lpos anywhere", func(t *testing.T) {
		w := build()
		idx := w.ids[5] & 15
		w.word(w.descs+idx*w.descSize+p, 0x123456789a0)
		w.word(w.descs+idx*w.descSize+2*p, 0x10)
		idx = w.ids[6] & 15
		w.word(w.descs+idx*w.descSize+p, w.begins[2]) // another record's block
		w.word(w.descs+idx*w.descSize+2*p, w.nexts[2])
		l, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.Len(t, gaps, 1)
		assert.ErrorIs(t, gaps[0].Err, ErrCorrupt)
		assert.Equal(t, uint64(2), gaps[0].Count)
		assert.Len(t, recs, 8)
	})
	t.Run("seq of another slot", func(t *testing.T) {
		w := build()
		idx := w.ids[4] & 15
		w.u64(w.infos+idx*w.infoSize, 12345)
		l, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.Len(t, gaps, 1)
		assert.Len(t, recs, 9)
	})
	t.Run("reserved head", func(t *testing.T) {
		w := build()
		idx := w.ids[9] & 15
		w.word(w.descs+idx*w.descSize, w.sv(descReserved, w.ids[9]))
		l, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.Len(t, gaps, 1)
		assert.ErrorIs(t, gaps[0].Err, ErrIncomplete)
		assert.Len(t, recs, 9)
	})
	t.Run("prb pointer unsaved", func(t *testing.T) {
		w := build()
		w.mem.drop(w.prbPtr)
		_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.ErrorIs(t, err, memory.ErrNotSaved)
	})
	t.Run("missing offsets", func(t *testing.T) {
		w := build()
		w.vmi = w.vmi[:5]
		_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrMissingInfo)
	})
	t.Run("offset past struct", func(t *testing.T) {
		w := build()
		w.line("OFFSET(printk_info.caller_id)=86")
		_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrCorrupt)
	})
}

func TestNoLog(t *testing.T) {
	w := newWorld(binary.LittleEndian, 8, 16)
	_, err := Open(w.mem, w.info("6.1.0"), Options{Target: le64})
	require.ErrorIs(t, err, ErrMissingInfo)
	_, err = Open(w.mem, nil, Options{Target: le64})
	require.ErrorIs(t, err, ErrMissingInfo)
	// No target: an error, not a little-endian 64-bit guess.
	_, err = Open(w.mem, w.info("6.1.0"), Options{})
	require.ErrorIs(t, err, memory.ErrUnknownTarget)
}

func TestVarBuf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bo     binary.ByteOrder
		caller bool
	}{{"le", binary.LittleEndian, false}, {"be-caller", binary.BigEndian, true}} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVarWorld(tc.bo, 8, 4096, tc.caller)
			const n = 300 // wraps the 4 KiB buffer many times
			for i := range n {
				x := textRec(i)
				if i%5 == 0 {
					x.dict = "SUBSYSTEM=pci\x00DEVICE=+pci:0000:00:01.0"
				}
				v.add(x)
			}
			v.finish(1000)
			lookup := func(name string) (uint64, bool) { return v.firstSeqAddr, name == "log_first_seq" }
			l, err := Open(v.mem, v.info("5.4.0"), Options{Target: memory.Target{ByteOrder: tc.bo, PtrSize: 8}, Symbol: lookup})
			require.NoError(t, err)
			assert.Equal(t, Variable, l.Format())
			recs, gaps, _ := collect(t, l)
			require.Empty(t, gaps)
			require.Len(t, recs, len(v.records))
			first := n - len(v.records)
			for i, r := range recs {
				want := textRec(first + i)
				require.Equal(t, want.text, r.Text, "record %d", i)
				assert.Equal(t, want.ts, r.TimeNS)
				assert.Equal(t, want.level, r.Level)
				assert.Equal(t, want.facility, r.Facility)
				assert.Equal(t, uint64(1000+i), r.Seq)
				assert.True(t, r.SeqKnown)
				assert.Equal(t, tc.caller, r.HasCaller)
				if tc.caller {
					assert.Equal(t, want.caller, r.CallerID)
				}
				if (first+i)%5 == 0 {
					assert.Equal(t, "SUBSYSTEM=pci\nDEVICE=+pci:0000:00:01.0", r.Dict)
				}
			}
		})
	}
}

// TestVarBufFilteredPage drops a page in the middle of the buffer: the
// records before it are returned, a gap marks the loss, and the walk
// finds the next record after the page and goes on to the end.
func TestVarBufFilteredPage(t *testing.T) {
	v := newVarWorld(binary.LittleEndian, 8, 4*4096, false)
	for i := range 1000 {
		v.add(textRec(i))
	}
	v.finish(0)
	v.mem.drop(v.buf + 2*4096)
	l, err := Open(v.mem, v.info("5.4.0"), Options{Target: le64})
	require.NoError(t, err)
	recs, gaps, all := collect(t, l)
	require.Len(t, gaps, 1)
	assert.ErrorIs(t, gaps[0].Err, memory.ErrNotSaved)
	// Every record returned is one that was written, in order, and only
	// those touching the dropped page are lost.
	first := 1000 - len(v.records)
	lost := 0
	for i, off := range v.records {
		end := off + v.hdr + uint64(len(textRec(first+i).text))
		if off < 3*4096 && end > 2*4096 {
			lost++
		}
	}
	require.Equal(t, len(v.records)-lost, len(recs))
	j := 0
	for _, e := range all {
		if e.Gap != nil {
			continue
		}
		for textRec(first+j).text != e.Record.Text {
			j++
			require.Less(t, j, len(v.records))
		}
		assert.False(t, e.Record.SeqKnown, "no log_first_seq was given")
	}
}

func TestVarBufHostile(t *testing.T) {
	build := func() *varWorld {
		v := newVarWorld(binary.LittleEndian, 8, 4096, false)
		for i := range 50 {
			v.add(textRec(i))
		}
		v.finish(0)
		return v
	}
	t.Run("log_buf_len 2^32-1", func(t *testing.T) {
		v := build()
		v.u32(v.mem.base+0x110, 0xffffffff)
		_, err := Open(v.mem, v.info("5.4.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("first past the buffer", func(t *testing.T) {
		v := build()
		v.u32(v.mem.base+0x118, 5000)
		_, err := Open(v.mem, v.info("5.4.0"), Options{Target: le64})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("len past the buffer", func(t *testing.T) {
		v := build()
		off := v.records[len(v.records)/2]
		v.u16(v.buf+off+8, 0xfff0)
		l, err := Open(v.mem, v.info("5.4.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.Len(t, gaps, 1)
		assert.ErrorIs(t, gaps[0].Err, ErrCorrupt)
		assert.Equal(t, len(v.records)-1, len(recs))
	})
	t.Run("text_len past the record", func(t *testing.T) {
		v := build()
		off := v.records[3]
		v.u16(v.buf+off+10, 0xffff)
		l, err := Open(v.mem, v.info("5.4.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		require.Len(t, gaps, 1)
		assert.Equal(t, len(v.records)-1, len(recs))
	})
	t.Run("all zero", func(t *testing.T) {
		v := build()
		clear(v.mem.b[v.buf-v.mem.base:])
		l, err := Open(v.mem, v.info("5.4.0"), Options{Target: le64})
		require.NoError(t, err)
		recs, gaps, _ := collect(t, l)
		assert.Empty(t, recs)
		assert.NotEmpty(t, gaps)
	})
}

// TestVarBufLegacyCont checks how kernels before 4.9 printed continuation
// fragments: by the previous record's flags.
func TestVarBufLegacyCont(t *testing.T) {
	for _, rel := range []string{"4.8.0", "4.9.0"} {
		v := newVarWorld(binary.LittleEndian, 8, 4096, false)
		v.add(rec{text: "CPU features:", flags: FlagCont | FlagPrefix})
		v.add(rec{text: " sse", flags: FlagCont})
		v.add(rec{text: " avx", flags: FlagCont | FlagNewline})
		v.add(rec{text: "next line", flags: FlagPrefix | FlagNewline})
		v.finish(0)
		l, err := Open(v.mem, v.info(rel), Options{Target: le64})
		require.NoError(t, err)
		recs, _, _ := collect(t, l)
		require.Len(t, recs, 4)
		legacy := rel == "4.8.0"
		assert.Equal(t, []bool{false, legacy, legacy, false}, []bool{recs[0].NoPrefix, recs[1].NoPrefix, recs[2].NoPrefix, recs[3].NoPrefix})
		assert.Equal(t, []bool{legacy, legacy, false, false}, []bool{recs[0].NoNewline, recs[1].NoNewline, recs[2].NoNewline, recs[3].NoNewline})
	}
}
