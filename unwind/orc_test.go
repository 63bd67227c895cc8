package unwind

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
)

const (
	kText  uint64 = 0xffffffff81000000
	orcIP  uint64 = 0xffffffff82000000
	orcTab uint64 = 0xffffffff82100000
	kStack uint64 = 0xffffc90000010000 // a 16 KiB task stack
)

type orcFn struct {
	addr         uint64
	spReg, bpReg orcBase
	spOff, bpOff int16
	kind         int // kindCall, kindRegs, kindIret, kindEnd, kindUndefined
	signal       bool
}

// rawReg is the number format f gives base register r.
func rawReg(f ORCFormat, r orcBase) uint16 {
	regs := orcRegsBefore71
	if f == ORC71 {
		regs = orcRegs71
	}
	for i, b := range regs {
		if b == r {
			return uint16(i)
		}
	}
	panic(fmt.Sprintf("no number for base register %d in format %d", r, f))
}

// orcWorld writes ORC tables for fns (sorted by address) in format f.
func orcWorld(m *testutil.SparseMemory, fns []orcFn, f ORCFormat) ORCTables {
	for i, fn := range fns {
		slot := orcIP + 4*uint64(i)
		m.PutU32(slot, uint32(int32(int64(fn.addr-slot))))
		bits := rawReg(f, fn.spReg) | rawReg(f, fn.bpReg)<<4
		switch f {
		case ORC64, ORC71:
			t := map[int]uint16{kindUndefined: 0, kindEnd: 1, kindCall: 2, kindRegs: 3, kindIret: 4}[fn.kind]
			bits |= t << 8
			if fn.signal {
				bits |= 1 << 11
			}
		default:
			if fn.kind == kindEnd {
				bits = rawReg(f, fn.bpReg)<<4 | 1<<10 // sp_reg undefined, end
			} else {
				bits |= uint16(fn.kind) << 8
			}
		}
		var b [6]byte
		binary.LittleEndian.PutUint16(b[0:], uint16(fn.spOff))
		binary.LittleEndian.PutUint16(b[2:], uint16(fn.bpOff))
		binary.LittleEndian.PutUint16(b[4:], bits)
		m.Write(orcTab+6*uint64(i), b[:])
	}
	return ORCTables{IPStart: orcIP, IPStop: orcIP + 4*uint64(len(fns)), Entries: orcTab, Format: f}
}

func TestORC(t *testing.T) {
	for _, f := range []ORCFormat{ORCBefore63, ORC64, ORC71} {
		m := testutil.NewSparseMemory()
		fns := []orcFn{
			{addr: kText + 0x000, kind: kindRegs, spReg: orcRegSP, spOff: 0, bpReg: orcRegUndefined}, // entry_SYSCALL_64: pt_regs at sp
			{addr: kText + 0x100, kind: kindCall, spReg: orcRegSP, spOff: 8},                         // do_syscall_64, no frame: CFA = sp+8
			{addr: kText + 0x200, kind: kindCall, spReg: orcRegBP, spOff: 16, bpReg: orcRegPrevSP, bpOff: -16},
			{addr: kText + 0x300, kind: kindCall, spReg: orcRegSP, spOff: 24, bpReg: orcRegPrevSP, bpOff: -16},
			{addr: kText + 0x400, kind: kindUndefined}, // terminator
		}
		tabs := orcWorld(m, fns, f)
		// The stack, from the CPU's sp up: f3's frame (24 bytes: a saved
		// rbp at CFA-16, the return address into f2 at CFA-8), then f2's
		// (rbp-based: [rbp] saved rbp, [rbp+8] return into f1), then f1's
		// return address into the syscall entry, then pt_regs from user.
		sp := uint64(kStack + 0x3000)
		m.PutU64(sp+8, kStack+0x3020)   // f3 saved rbp (CFA-16): f2 frame pointer
		m.PutU64(sp+16, kText+0x210)    // return into f2
		rbp2 := uint64(kStack + 0x3020) // f2's frame pointer
		m.PutU64(rbp2, kStack+0x3900)   // f2's saved rbp
		m.PutU64(rbp2+8, kText+0x110)   // return into f1 (CFA = rbp+16)
		m.PutU64(rbp2+16, kText+0x010)  // f1: return into the entry code (CFA = sp+8)
		regs := uint64(rbp2 + 24)
		m.PutU64(regs+8*regCS, 0x33) // user cs
		m.PutU64(regs+8*regIP, 0x401000)
		cpu := make([]uint64, 27)
		cpu[regIP], cpu[regSP], cpu[regBP] = kText+0x320, sp, rbp2
		fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
		assert.True(t, stop.Final, "format %d: %s", f, stop)
		assert.Contains(t, stop.String(), "user space")
		assert.Equal(t, []uint64{kText + 0x320, kText + 0x210, kText + 0x110, kText + 0x010}, pcs(fr), "format %d", f)
	}
}

func TestORCHostile(t *testing.T) {
	m := testutil.NewSparseMemory()
	fns := []orcFn{
		{addr: kText, kind: kindCall, spReg: orcRegSP, spOff: 0}, // CFA = sp: the return address below sp, a loop
		{addr: kText + 0x100, kind: kindCall, spReg: orcRegSP, spOff: 8},
		{addr: kText + 0x200, kind: kindUndefined},
	}
	tabs := orcWorld(m, fns, ORC64)
	cpu := make([]uint64, 27)
	t.Run("loop", func(t *testing.T) {
		sp := uint64(kStack + 0x100)
		m.PutU64(sp-8, kText+0x10)
		cpu[regIP], cpu[regSP] = kText+0x10, sp
		fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.LessOrEqual(t, len(fr), 3)
	})
	t.Run("unsaved stack", func(t *testing.T) {
		cpu[regIP], cpu[regSP] = kText+0x110, kStack+0x8000
		_, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
		assert.ErrorIs(t, stop.Err, memory.ErrNotSaved)
	})
	t.Run("module address", func(t *testing.T) {
		cpu[regIP] = 0xffffffffc0001000
		fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
		assert.ErrorIs(t, stop.Err, ErrNoORC)
		assert.Len(t, fr, 1)
	})
	t.Run("terminator", func(t *testing.T) {
		cpu[regIP] = kText + 0x200
		_, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
	})
	t.Run("bad tables", func(t *testing.T) {
		_, stop := ORC(m, cpu, ORCTables{IPStart: orcIP, IPStop: orcIP + 3}, Options{})
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		_, stop = ORC(m, cpu, ORCTables{IPStart: orcIP, IPStop: orcIP + 4<<26}, Options{})
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		_, stop = ORC(m, cpu[:5], tabs, Options{})
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
	})
}

func TestORCFormatFor(t *testing.T) {
	assert.Equal(t, ORCBefore63, ORCFormatFor(5, 10))
	assert.Equal(t, ORCBefore63, ORCFormatFor(6, 1))
	assert.Equal(t, ORC63, ORCFormatFor(6, 3))
	assert.Equal(t, ORC64, ORCFormatFor(6, 4))
	assert.Equal(t, ORC64, ORCFormatFor(6, 12))
	assert.Equal(t, ORC64, ORCFormatFor(7, 0))
	assert.Equal(t, ORC71, ORCFormatFor(7, 1))
	assert.Equal(t, ORC71, ORCFormatFor(8, 0))

}

// orcModWorld writes a module's tables for fns at ip and tab.
func orcModWorld(m *testutil.SparseMemory, name string, start, end, ip, tab uint64, fns []orcFn) ORCModule {
	for i, fn := range fns {
		slot := ip + 4*uint64(i)
		m.PutU32(slot, uint32(int32(int64(fn.addr-slot))))
		t := map[int]uint16{kindUndefined: 0, kindEnd: 1, kindCall: 2, kindRegs: 3, kindIret: 4}[fn.kind]
		var b [6]byte
		binary.LittleEndian.PutUint16(b[0:], uint16(fn.spOff))
		binary.LittleEndian.PutUint16(b[2:], uint16(fn.bpOff))
		binary.LittleEndian.PutUint16(b[4:], rawReg(ORC64, fn.spReg)|rawReg(ORC64, fn.bpReg)<<4|t<<8)
		m.Write(tab+6*uint64(i), b[:])
	}
	return ORCModule{Name: name, Start: start, End: end, IP: ip, Entries: tab, N: uint64(len(fns))}
}

// TestORCModules: a walk from vmlinux's code into one module's, through
// a second module's, back to vmlinux, each frame found in the table of
// the module whose text holds it.
func TestORCModules(t *testing.T) {
	const (
		modA = 0xffffffffc0001000 // text [modA, modA+0x1000)
		modB = 0xffffffffc0010000 // text [modB, modB+0x2000)
	)
	m := testutil.NewSparseMemory()
	tabs := orcWorld(m, []orcFn{
		{addr: kText, kind: kindEnd},                                     // the stack's bottom
		{addr: kText + 0x100, kind: kindCall, spReg: orcRegSP, spOff: 8}, // calls into modB
		{addr: kText + 0x200, kind: kindUndefined},
	}, ORC64)
	// Module A: one frameless function calling into module B.
	a := orcModWorld(m, "a", modA, modA+0x1000, 0xffffffffc0008000, 0xffffffffc0009000, []orcFn{
		{addr: modA, kind: kindCall, spReg: orcRegSP, spOff: 16},
		{addr: modA + 0x800, kind: kindUndefined},
	})
	// Module B: an rbp-based function.
	b := orcModWorld(m, "b", modB, modB+0x2000, 0xffffffffc0018000, 0xffffffffc0019000, []orcFn{
		{addr: modB, kind: kindCall, spReg: orcRegSP, spOff: 8},
		{addr: modB + 0x400, kind: kindCall, spReg: orcRegBP, spOff: 16, bpReg: orcRegPrevSP, bpOff: -16},
		{addr: modB + 0x1000, kind: kindUndefined},
	})
	tabs.Modules = []ORCModule{b, a}
	// The CPU is in module A (sp-based, CFA = sp+16), called from module
	// B's rbp-based function, called from vmlinux at kText+0x100, called
	// from the end-of-stack code.
	sp := uint64(kStack + 0x2000)
	m.PutU64(sp+8, modB+0x410)     // return into B
	rbp := uint64(kStack + 0x2040) // B's frame
	m.PutU64(rbp, kStack+0x2100)   // B's saved rbp
	m.PutU64(rbp+8, kText+0x110)   // return into vmlinux
	m.PutU64(rbp+16, kText+0x010)  // vmlinux's frameless function's return
	cpu := make([]uint64, 27)
	cpu[regIP], cpu[regSP], cpu[regBP] = modA+0x20, sp, rbp
	fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
	assert.True(t, stop.Final, "%s", stop)
	assert.Equal(t, []uint64{modA + 0x20, modB + 0x410, kText + 0x110, kText + 0x010}, pcs(fr))

	t.Run("bad num_orcs", func(t *testing.T) {
		bad := tabs
		bad.Modules = []ORCModule{b, a}
		bad.Modules[1].N = 1 << 40 // far more entries than 4 KiB of text could have
		fr, stop := ORC(m, cpu, bad, Options{KernelStart: kText})
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		// Names the address, the module and its num_orcs.
		errshape.Require(t, stop.Err, fmt.Sprintf("%#x [a]", uint64(modA+0x20)), fmt.Sprintf("num_orcs %d", uint64(1<<40)))
		assert.Len(t, fr, 1)
	})
	t.Run("no module tables", func(t *testing.T) {
		none := tabs
		needBTF := errors.New("module frames need BTF")
		none.Modules, none.ModulesErr = nil, needBTF
		_, stop := ORC(m, cpu, none, Options{KernelStart: kText})
		assert.ErrorIs(t, stop.Err, ErrNoORC)
		assert.ErrorIs(t, stop.Err, needBTF, "the modules' error is the cause")
		errshape.Require(t, stop.Err)
	})
}

func TestORCHeader(t *testing.T) {
	m := testutil.NewSparseMemory()
	tabs := orcWorld(m, []orcFn{
		{addr: kText, kind: kindEnd},
		{addr: kText + 0x200, kind: kindUndefined},
	}, ORC64)
	cpu := make([]uint64, 27)
	cpu[regIP], cpu[regSP] = kText+0x10, kStack+0x100
	known := []byte{0xfe, 0x5d, 0x32, 0xbf, 0x58, 0x1b, 0xd6, 0x3b, 0x2c, 0xa9, 0xa5, 0xc6, 0x5b, 0xa5, 0xa6, 0x25, 0xea, 0xb3, 0xfe, 0x24}
	// The header wins over a release's format: the table is in the 6.4
	// format, the release says older.
	tabs.Format, tabs.Header = ORCBefore63, known
	_, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
	assert.True(t, stop.Final, "%s", stop)

	unknown := bytes.Repeat([]byte{0xab}, 20)
	tabs.Header = unknown
	fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
	assert.ErrorIs(t, stop.Err, ErrORCFormat)
	errshape.Require(t, stop.Err, hex.EncodeToString(unknown)) // names the header by its hash
	assert.Empty(t, fr)

	_, err := ORCFormatForHeader(known[:19])
	assert.ErrorIs(t, err, ErrORCFormat)
	f, err := ORCFormatForHeader(known)
	assert.NoError(t, err)
	assert.Equal(t, ORC64, f)
}

// TestORCRegAX: ORC_REG_AX takes the CFA from rax, known in the first
// frame's registers, under both headers that define it: 7.1's, where it is
// 1, and the edfa4d15… one, where it is 10.
func TestORCRegAX(t *testing.T) {
	for _, c := range []struct {
		format ORCFormat
		header string
	}{
		{ORC71, "137c36ad7627c4dd55932176bb0ecdbd5041fc82"},
		{ORC64, "edfa4d15552fdd2e1d56679728416379f2fe4534"},
	} {
		m := testutil.NewSparseMemory()
		tabs := orcWorld(m, []orcFn{
			{addr: kText, kind: kindEnd},
			{addr: kText + 0x100, kind: kindCall, spReg: orcRegAX, spOff: 16}, // a DRAP sequence through rax
			{addr: kText + 0x200, kind: kindUndefined},
		}, c.format)
		// The release says nothing of it: the header names the format.
		tabs.Format = ORCBefore63
		tabs.Header, _ = hex.DecodeString(c.header)
		cpu := make([]uint64, 27)
		rax := uint64(kStack + 0x1000)
		m.PutU64(rax+8, kText+0x20) // the return address at CFA-8
		cpu[regIP], cpu[regSP], cpu[regAX] = kText+0x110, kStack+0x800, rax
		fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
		assert.True(t, stop.Final, "%s: %s", c.header, stop)
		assert.Equal(t, []uint64{kText + 0x110, kText + 0x20}, pcs(fr), c.header)
		e, err := ORCLookup(m, tabs, kText+0x110)
		assert.NoError(t, err)
		assert.Equal(t, "ax", e.SPBase, c.header)
		assert.Equal(t, int(rawReg(c.format, orcRegAX)), e.SPReg, c.header)
	}
}

// TestORCRenumbered: 7.1's numbers are not 6.4's. The same entry bits (sp_reg
// 3, bp_reg 8) are "CFA = sp + off, rbp saved at CFA + bp_off" under the
// 7.1 header and "CFA = rdi + off, rbp indirect" under the 6.4 one.
func TestORCRenumbered(t *testing.T) {
	m := testutil.NewSparseMemory()
	tabs := orcWorld(m, []orcFn{
		{addr: kText, kind: kindEnd},
		{addr: kText + 0x100, kind: kindCall, spReg: orcRegSP, spOff: 16, bpReg: orcRegPrevSP, bpOff: -16},
		{addr: kText + 0x200, kind: kindUndefined},
	}, ORC71)
	sp := uint64(kStack + 0x800)
	m.PutU64(sp, kStack+0xf00) // the saved rbp at CFA-16
	m.PutU64(sp+8, kText+0x20) // the return address at CFA-8
	cpu := make([]uint64, 27)
	cpu[regIP], cpu[regSP] = kText+0x110, sp
	tabs.Header, _ = hex.DecodeString("137c36ad7627c4dd55932176bb0ecdbd5041fc82")
	e, err := ORCLookup(m, tabs, kText+0x110)
	assert.NoError(t, err)
	assert.Equal(t, ORCEntry{SPReg: 3, BPReg: 8, SPBase: "sp", BPBase: "prevsp", SPOffset: 16, BPOffset: -16, Type: "call"}, e)
	fr, stop := ORC(m, cpu, tabs, Options{KernelStart: kText})
	assert.True(t, stop.Final, "%s", stop)
	assert.Equal(t, []uint64{kText + 0x110, kText + 0x20}, pcs(fr))

	tabs.Header, _ = hex.DecodeString("fe5d32bf581bd63b2ca9a5c65ba5a625eab3fe24")
	e, err = ORCLookup(m, tabs, kText+0x110)
	assert.NoError(t, err)
	assert.Equal(t, "di", e.SPBase)
	assert.Equal(t, "bp(ind)", e.BPBase)
	// Read that way the CFA is rdi (0 here) + 16: no return address there.
	fr, stop = ORC(m, cpu, tabs, Options{KernelStart: kText})
	assert.ErrorIs(t, stop.Err, memory.ErrNotSaved)
	assert.Len(t, fr, 1)
}
