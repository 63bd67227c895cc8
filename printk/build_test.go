package printk

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// flatMem is synthetic kernel memory: one byte image at base, with pages
// (4 KiB) that can be dropped as makedumpfile's filtering drops them.
type flatMem struct {
	base    uint64
	b       []byte
	dropped map[uint64]bool
}

func (m *flatMem) ReadAt(p []byte, addr uint64) (int, error) {
	for n := range p {
		a := addr + uint64(n)
		if a < m.base || a-m.base >= uint64(len(m.b)) || m.dropped[a&^4095] {
			return n, memory.Fault(a, "kernel virtual", "", memory.ErrNotSaved)
		}
		p[n] = m.b[a-m.base]
	}
	return len(p), nil
}

func (m *flatMem) drop(addr uint64) {
	if m.dropped == nil {
		m.dropped = map[uint64]bool{}
	}
	m.dropped[addr&^4095] = true
}

// world lays out structures in one image.
type world struct {
	bo  binary.ByteOrder
	ptr int
	mem *flatMem
	vmi []string
}

func newWorld(bo binary.ByteOrder, ptr int, size int) *world {
	return &world{bo: bo, ptr: ptr, mem: &flatMem{base: baseFor(ptr), b: make([]byte, size)}}
}

// baseFor is where a world's image starts: in the kernel half of the
// address space of a 64- or 32-bit kernel.
func baseFor(ptr int) uint64 {
	if ptr == 4 {
		return 0xc0000000
	}
	return 0xffff800000000000
}

func (w *world) word(addr, v uint64) {
	o := addr - w.mem.base
	if w.ptr == 4 {
		w.bo.PutUint32(w.mem.b[o:], uint32(v))
	} else {
		w.bo.PutUint64(w.mem.b[o:], v)
	}
}
func (w *world) u64(addr, v uint64) { w.bo.PutUint64(w.mem.b[addr-w.mem.base:], v) }
func (w *world) u32(addr uint64, v uint32) {
	w.bo.PutUint32(w.mem.b[addr-w.mem.base:], v)
}
func (w *world) u16(addr uint64, v uint16) {
	w.bo.PutUint16(w.mem.b[addr-w.mem.base:], v)
}
func (w *world) bytes(addr uint64, b []byte) { copy(w.mem.b[addr-w.mem.base:], b) }
func (w *world) line(format string, a ...any) {
	w.vmi = append(w.vmi, fmt.Sprintf(format, a...))
}

func (w *world) info(release string) *vmcoreinfo.Info {
	in, err := vmcoreinfo.Parse([]byte("OSRELEASE=" + release + "\n" + strings.Join(w.vmi, "\n") + "\n"))
	if err != nil {
		panic(err)
	}
	return in
}

func (w *world) levelByte(level, flags uint8) byte {
	if w.bo == binary.BigEndian {
		return flags<<3 | level
	}
	return level<<5 | flags
}

// rec is a record to write.
type rec struct {
	ts              uint64
	level, facility uint8
	flags           uint8
	caller          uint32
	text            string
	subsystem       string
	device          string
	dict            string // the older buffer: NUL-separated
}

// ringWorld is a lockless ring laid out as the kernel does, with the
// VMCOREINFO lines that describe it.
type ringWorld struct {
	*world
	countBits, sizeBits uint
	prbPtr, rb          uint64
	descs, infos, data  uint64
	descSize, infoSize  uint64
	idMask              uint64
	nextID, headLpos    uint64
	ids                 []uint64 // ids written, in order
	begins, nexts, seqs []uint64
	dataless            map[int]bool
}

func newRingWorld(bo binary.ByteOrder, ptr int, countBits, sizeBits uint) *ringWorld {
	count, size := uint64(1)<<countBits, uint64(1)<<sizeBits
	p := uint64(ptr)
	r := &ringWorld{countBits: countBits, sizeBits: sizeBits}
	ringBase := baseFor(ptr)
	r.descSize = 3 * p
	r.infoSize = 88
	r.prbPtr = ringBase + 0x100
	r.rb = ringBase + 0x200
	r.descs = ringBase + 0x1000
	r.infos = r.descs + ((count*r.descSize + 4095) &^ 4095)
	r.data = r.infos + ((count*r.infoSize + 4095) &^ 4095)
	total := r.data + size - ringBase
	r.world = newWorld(bo, ptr, int(total))
	r.dataless = map[int]bool{}
	bits := uint(8 * ptr)
	r.idMask = 1<<(bits-2) - 1
	// The kernel starts ids and lpos just before a wrap (DESC0_ID,
	// BLK0_LPOS), so that wrapping is exercised early; so do we.
	r.nextID = (-count) & r.idMask
	r.headLpos = (-size) & (1<<(bits-1)<<1 - 1)

	descRingSize := 5 * p
	r.line("SYMBOL(prb)=%x", r.prbPtr)
	r.line("SIZE(printk_ringbuffer)=%d", descRingSize+4*p+p)
	r.line("OFFSET(printk_ringbuffer.desc_ring)=0")
	r.line("OFFSET(printk_ringbuffer.text_data_ring)=%d", descRingSize)
	r.line("OFFSET(printk_ringbuffer.fail)=%d", descRingSize+4*p)
	r.line("SIZE(prb_desc_ring)=%d", descRingSize)
	r.line("OFFSET(prb_desc_ring.count_bits)=0")
	r.line("OFFSET(prb_desc_ring.descs)=%d", p)
	r.line("OFFSET(prb_desc_ring.infos)=%d", 2*p)
	r.line("OFFSET(prb_desc_ring.head_id)=%d", 3*p)
	r.line("OFFSET(prb_desc_ring.tail_id)=%d", 4*p)
	r.line("SIZE(prb_desc)=%d", r.descSize)
	r.line("OFFSET(prb_desc.state_var)=0")
	r.line("OFFSET(prb_desc.text_blk_lpos)=%d", p)
	r.line("SIZE(prb_data_blk_lpos)=%d", 2*p)
	r.line("OFFSET(prb_data_blk_lpos.begin)=0")
	r.line("OFFSET(prb_data_blk_lpos.next)=%d", p)
	r.line("SIZE(printk_info)=88")
	r.line("OFFSET(printk_info.seq)=0")
	r.line("OFFSET(printk_info.ts_nsec)=8")
	r.line("OFFSET(printk_info.text_len)=16")
	r.line("OFFSET(printk_info.caller_id)=20")
	r.line("OFFSET(printk_info.dev_info)=24")
	r.line("SIZE(dev_printk_info)=64")
	r.line("OFFSET(dev_printk_info.subsystem)=0")
	r.line("LENGTH(printk_info_subsystem)=16")
	r.line("OFFSET(dev_printk_info.device)=16")
	r.line("LENGTH(printk_info_device)=48")
	r.line("SIZE(prb_data_ring)=%d", 4*p)
	r.line("OFFSET(prb_data_ring.size_bits)=0")
	r.line("OFFSET(prb_data_ring.data)=%d", p)
	r.line("OFFSET(prb_data_ring.head_lpos)=%d", 2*p)
	r.line("OFFSET(prb_data_ring.tail_lpos)=%d", 3*p)
	return r
}

func (r *ringWorld) sv(state, id uint64) uint64 {
	return state<<(8*r.ptr-2) | id
}

// add appends a finalized record as prb_reserve and prb_final_commit do.
func (r *ringWorld) add(x rec) {
	count, size := uint64(1)<<r.countBits, uint64(1)<<r.sizeBits
	p := uint64(r.ptr)
	id := r.nextID
	r.nextID = (r.nextID + 1) & r.idMask
	idx := id & (count - 1)
	seq := uint64(len(r.ids))
	wm := uint64(1)<<(8*p-1)<<1 - 1
	var begin, next uint64
	if x.text == "" {
		begin, next = 3, 3 // NO_LPOS: an empty line
	} else {
		blk := (uint64(len(x.text))+p-1)&^(p-1) + p
		begin = r.headLpos
		next = (begin + blk) & wm
		off := begin & (size - 1)
		if begin>>r.sizeBits != next>>r.sizeBits {
			// A wrapping block is stored at the ring's start.
			next = ((next>>r.sizeBits)<<r.sizeBits + blk) & wm
			off = 0
		}
		r.headLpos = next
		r.word(r.data+off, id)
		r.bytes(r.data+off+p, []byte(x.text))
	}
	d := r.descs + idx*r.descSize
	r.word(d, r.sv(descFinalized, id))
	r.word(d+p, begin)
	r.word(d+2*p, next)
	in := r.infos + idx*r.infoSize
	clear(r.mem.b[in-r.mem.base : in-r.mem.base+r.infoSize])
	r.u64(in, seq)
	r.u64(in+8, x.ts)
	r.u16(in+16, uint16(len(x.text)))
	r.mem.b[in+18-r.mem.base] = x.facility
	r.mem.b[in+19-r.mem.base] = r.levelByte(x.level, x.flags)
	r.u32(in+20, x.caller)
	r.bytes(in+24, []byte(x.subsystem))
	r.bytes(in+40, []byte(x.device))
	r.ids = append(r.ids, id)
	r.begins = append(r.begins, begin)
	r.nexts = append(r.nexts, next)
	r.seqs = append(r.seqs, seq)
}

// finish writes the ring's control data: the tail is the oldest record
// whose descriptor and text survive; the records before it are made
// reusable, as data_push_tail does. It returns the seq of the tail.
func (r *ringWorld) finish() uint64 {
	count, size := uint64(1)<<r.countBits, uint64(1)<<r.sizeBits
	p := uint64(r.ptr)
	n := len(r.ids)
	tail := max(0, n-int(count))
	wm := uint64(1)<<(8*p-1)<<1 - 1
	for tail < n-1 {
		b := r.begins[tail]
		if b&1 != 0 || (r.headLpos-b)&wm <= size {
			break
		}
		tail++
	}
	for i := max(0, n-int(count)); i < tail; i++ {
		idx := r.ids[i] & (count - 1)
		r.word(r.descs+idx*r.descSize, r.sv(descReusable, r.ids[i]))
	}
	r.word(r.prbPtr, r.rb)
	r.u32(r.rb, uint32(r.countBits))
	r.word(r.rb+p, r.descs)
	r.word(r.rb+2*p, r.infos)
	r.word(r.rb+3*p, r.ids[n-1])
	r.word(r.rb+4*p, r.ids[tail])
	dr := r.rb + 5*p
	r.u32(dr, uint32(r.sizeBits))
	r.word(dr+p, r.data)
	r.word(dr+2*p, r.headLpos)
	return uint64(tail)
}

// varWorld is a buffer of the older variable-length records.
type varWorld struct {
	*world
	buf, length  uint64
	first, next  uint64
	hdr          uint64
	align        uint64
	caller       bool
	firstSeqAddr uint64
	logBuf       uint64
	records      []uint64 // offsets written, in order
}

func newVarWorld(bo binary.ByteOrder, ptr int, length uint64, caller bool) *varWorld {
	v := &varWorld{length: length, hdr: 16, align: 4, caller: caller}
	ringBase := baseFor(ptr)
	if caller {
		v.hdr = 20
	}
	v.world = newWorld(bo, ptr, int(0x1000+length))
	v.logBuf = ringBase + 0x100
	lenAddr := ringBase + 0x110
	firstAddr := ringBase + 0x118
	nextAddr := ringBase + 0x120
	v.firstSeqAddr = ringBase + 0x128
	v.buf = ringBase + 0x1000
	v.word(v.logBuf, v.buf)
	v.u32(lenAddr, uint32(length))
	v.line("SYMBOL(log_buf)=%x", v.logBuf)
	v.line("SYMBOL(log_buf_len)=%x", lenAddr)
	v.line("SYMBOL(log_first_idx)=%x", firstAddr)
	v.line("SYMBOL(log_next_idx)=%x", nextAddr)
	v.line("SIZE(printk_log)=%d", v.hdr)
	v.line("OFFSET(printk_log.ts_nsec)=0")
	v.line("OFFSET(printk_log.len)=8")
	v.line("OFFSET(printk_log.text_len)=10")
	v.line("OFFSET(printk_log.dict_len)=12")
	if caller {
		v.line("OFFSET(printk_log.caller_id)=16")
	}
	return v
}

// add stores a record as log_store does, making room by dropping the
// oldest records.
func (v *varWorld) add(x rec) {
	used := v.hdr + uint64(len(x.text)) + uint64(len(x.dict))
	size := (used + v.align - 1) &^ (v.align - 1)
	for {
		if len(v.records) == 0 {
			v.first, v.next = 0, 0
			break
		}
		if v.next > v.first {
			if v.length-v.next >= size+v.hdr {
				break
			}
			if v.first >= size+v.hdr {
				clear(v.mem.b[v.buf+v.next-v.mem.base : v.buf+min(v.next+v.hdr, v.length)-v.mem.base])
				v.next = 0 // wrap, leaving the end-of-buffer marker
				continue
			}
		} else if v.first-v.next >= size+v.hdr {
			break
		}
		v.first = v.nextOf(v.first)
		v.records = v.records[1:]
	}
	a := v.buf + v.next
	clear(v.mem.b[a-v.mem.base : a+size-v.mem.base])
	v.u64(a, x.ts)
	v.u16(a+8, uint16(size))
	v.u16(a+10, uint16(len(x.text)))
	v.u16(a+12, uint16(len(x.dict)))
	v.mem.b[a+14-v.mem.base] = x.facility
	v.mem.b[a+15-v.mem.base] = v.levelByte(x.level, x.flags)
	if v.caller {
		v.u32(a+16, x.caller)
	}
	v.bytes(a+v.hdr, []byte(x.text))
	v.bytes(a+v.hdr+uint64(len(x.text)), []byte(x.dict))
	v.records = append(v.records, v.next)
	v.next += size
}

func (v *varWorld) nextOf(idx uint64) uint64 {
	a := v.buf + idx
	l := uint64(v.bo.Uint16(v.mem.b[a+8-v.mem.base:]))
	if l == 0 {
		a = v.buf
		return uint64(v.bo.Uint16(v.mem.b[a+8-v.mem.base:]))
	}
	return idx + l
}

func (v *varWorld) finish(firstSeq uint64) {
	v.u32(v.mem.base+0x118, uint32(v.first))
	v.u32(v.mem.base+0x120, uint32(v.next))
	v.u64(v.firstSeqAddr, firstSeq)
}
