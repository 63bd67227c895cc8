package unwind

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	stack  = 0xffff800008010000 // a 16 KiB stack
	text   = 0xffffc00008000000
	irqStk = 0xffff800008100000
)

// le64 is the target of the frame-pointer tests that name none.
var le64 = memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}

// chain writes frame records at fps, each linking to the next and holding
// the return address rets[i].
func chain(m *testutil.SparseMemory, fps, rets []uint64) {
	for i, fp := range fps {
		next := uint64(0)
		if i+1 < len(fps) {
			next = fps[i+1]
		}
		m.PutU64(fp, next)
		m.PutU64(fp+8, rets[i])
	}
}

func pcs(fr []Frame) []uint64 {
	var out []uint64
	for _, f := range fr {
		out = append(out, f.PC)
	}
	return out
}

func TestFramePointer(t *testing.T) {
	opt := Options{Target: le64, KernelStart: text}
	t.Run("to the final record", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		fps := []uint64{stack + 0x100, stack + 0x180, stack + 0x200, stack + 0x3f00}
		chain(m, fps, []uint64{text + 0x10, text + 0x20, text + 0x30, text + 0x40})
		m.PutU64(stack+0x3f00, 0) // final: fp 0, lr 0
		m.PutU64(stack+0x3f08, 0)
		fr, stop := FramePointer(m, text+4, fps[0], opt)
		assert.True(t, stop.Final, stop.String())
		assert.Equal(t, []uint64{text + 4, text + 0x10, text + 0x20, text + 0x30}, pcs(fr))
	})
	t.Run("from an irq stack to the task's", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		fps := []uint64{irqStk + 0x10, irqStk + 0x40, stack + 0x100}
		chain(m, fps, []uint64{text + 0x10, text + 0x20, text + 0x30})
		fr, stop := FramePointer(m, text+4, fps[0], opt)
		assert.True(t, stop.Final)
		assert.Len(t, fr, 4)
	})
	t.Run("loop", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		m.PutU64(stack+0x100, stack+0x100)
		m.PutU64(stack+0x108, text+0x10)
		fr, stop := FramePointer(m, text+4, stack+0x100, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Len(t, fr, 2)
	})
	t.Run("ping-pong between stacks", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		chain(m, []uint64{stack + 0x100, irqStk + 0x100}, []uint64{text + 0x10, text + 0x20})
		m.PutU64(irqStk+0x100, stack+0x100) // back to the first: a loop across stacks
		fr, stop := FramePointer(m, text+4, stack+0x100, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.LessOrEqual(t, len(fr), 2+opt.MaxStacks+5)
	})
	t.Run("user return address", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		chain(m, []uint64{stack + 0x100, stack + 0x200}, []uint64{text + 0x10, 0x400000})
		fr, stop := FramePointer(m, text+4, stack+0x100, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Len(t, fr, 2)
	})
	t.Run("unsaved page", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		chain(m, []uint64{stack + 0x100}, []uint64{text + 0x10})
		m.PutU64(stack+0x100, stack+0x2000)
		fr, stop := FramePointer(m, text+4, stack+0x100, opt)
		assert.ErrorIs(t, stop.Err, memory.ErrNotSaved)
		assert.Len(t, fr, 2)
	})
	t.Run("user frame pointer", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		chain(m, []uint64{stack + 0x100}, []uint64{text + 0x10})
		m.PutU64(stack+0x100, 0xbfc568c0)
		fr, stop := FramePointer(m, text+4, stack+0x100, Options{Target: le64, KernelStart: text, UserEnd: 1 << 63})
		assert.True(t, stop.Final)
		assert.Contains(t, stop.String(), "user space")
		assert.Len(t, fr, 2)
	})
	t.Run("misaligned", func(t *testing.T) {
		fr, stop := FramePointer(testutil.NewSparseMemory(), text+4, stack+3, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Len(t, fr, 1)
	})
	t.Run("pac", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		chain(m, []uint64{stack + 0x100}, []uint64{(text + 0x10) &^ 0xff7f000000000000})
		fr, _ := FramePointer(m, text+4, stack+0x100, Options{Target: le64, KernelStart: text, PACMask: 0xff7f000000000000})
		require.Len(t, fr, 2)
		assert.Equal(t, uint64(text+0x10), fr[1].PC)
	})
	t.Run("32-bit big-endian", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		put := func(a uint64, v uint32) {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], v)
			m.Write(a, b[:])
		}
		put(0xc1000100, 0xc1000140)
		put(0xc1000104, 0xc8000010)
		put(0xc1000140, 0)
		put(0xc1000144, 0xc8000020)
		fr, stop := FramePointer(m, 0xc8000004, 0xc1000100, Options{Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 4}, KernelStart: 0xc0000000, StackSize: 8 << 10})
		assert.True(t, stop.Final)
		assert.Equal(t, []uint64{0xc8000004, 0xc8000010, 0xc8000020}, pcs(fr))
	})
	t.Run("bad options", func(t *testing.T) {
		_, stop := FramePointer(testutil.NewSparseMemory(), 0, 0, Options{Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 2}})
		assert.True(t, errors.Is(stop.Err, errors.ErrUnsupported))
		// No target: an error, not a little-endian 64-bit guess.
		_, stop = FramePointer(testutil.NewSparseMemory(), 0, 0, Options{})
		assert.ErrorIs(t, stop.Err, memory.ErrUnknownTarget)
		_, stop = BackChainPPC64(testutil.NewSparseMemory(), 0, 0, Options{})
		assert.ErrorIs(t, stop.Err, memory.ErrUnknownTarget)
	})
}

func TestBackChainS390(t *testing.T) {
	m := testutil.NewSparseMemory()
	be := func(a, v uint64) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], v)
		m.Write(a, b[:])
	}
	const sp0, kt = 0x37ffe700100, 0x3fffe800000
	// Three frames, then a zero back chain over the pt_regs of a system
	// call from user space.
	be(sp0+152, sp0+0x100)
	be(sp0+0x100+136, kt+0x10)
	be(sp0+0x100+152, sp0+0x200)
	be(sp0+0x200+136, kt+0x20)
	be(sp0+0x200+152, 0)
	be(sp0+0x200+160+8, 0x0705000180000000) // PSW mask with the problem-state bit
	fr, stop := BackChainS390(m, kt+4, sp0, Options{})
	assert.True(t, stop.Final, stop.String())
	assert.Contains(t, stop.String(), "user space")
	assert.Equal(t, []uint64{kt + 4, kt + 0x10, kt + 0x20}, pcs(fr))

	// An interrupt's pt_regs: the walk goes on at its PSW and r15.
	be(sp0+0x200+160+8, 0x0404000180000000)
	be(sp0+0x200+160+16, kt+0x30)
	be(sp0+0x200+160+24+15*8, sp0+0x300)
	be(sp0+0x300+152, 0)
	be(sp0+0x300+160+8, 0x0705000180000000)
	fr, stop = BackChainS390(m, kt+4, sp0, Options{})
	assert.True(t, stop.Final, stop.String())
	assert.Equal(t, []uint64{kt + 4, kt + 0x10, kt + 0x20, kt + 0x30}, pcs(fr))

	// A loop.
	be(sp0+0x100+152, sp0)
	_, stop = BackChainS390(m, kt+4, sp0, Options{})
	assert.ErrorIs(t, stop.Err, ErrBadFrame)
	// An unsaved frame.
	_, stop = BackChainS390(m, kt+4, 0x37ffe800000, Options{})
	assert.ErrorIs(t, stop.Err, memory.ErrNotSaved)
}

// TestFramePointerRISCV64: s0 points above its {fp, ra} record; a leaf
// function saved no ra, and its record's ra slot holds the caller's fp.
func TestFramePointerRISCV64(t *testing.T) {
	opt := Options{Target: le64, KernelStart: text, UserEnd: 1 << 63, RecordBelow: true}
	m := testutil.NewSparseMemory()
	// Frame pointers (s0 values); records at s0-16.
	fps := []uint64{stack + 0x100, stack + 0x180, stack + 0x3f00}
	for i, fp := range fps {
		next := uint64(0x7ffffd7b96f0) // the user s0 the entry code saved
		if i+1 < len(fps) {
			next = fps[i+1]
		}
		m.PutU64(fp-16, next)
		m.PutU64(fp-8, text+0x10*uint64(i+1))
	}
	fr, stop := FramePointer(m, text+4, fps[0], opt)
	assert.True(t, stop.Final, stop.String())
	assert.Contains(t, stop.Why, "user space")
	assert.Equal(t, []uint64{text + 4, text + 0x10, text + 0x20, text + 0x30}, pcs(fr))

	// A leaf at the top: its "record" is {?, caller's fp}; ra is RA.
	leaf := uint64(stack + 0x80)
	m.PutU64(leaf-16, 0xdead)
	m.PutU64(leaf-8, fps[0])
	opt.RA = text + 0x8
	fr, stop = FramePointer(m, text+4, leaf, opt)
	assert.True(t, stop.Final, stop.String())
	assert.Equal(t, []uint64{text + 4, text + 0x8, text + 0x10, text + 0x20, text + 0x30}, pcs(fr))

	// A frame pointer below the two words its record needs.
	_, stop = FramePointer(m, text+4, 8, Options{Target: le64, KernelStart: text, RecordBelow: true})
	assert.ErrorIs(t, stop.Err, ErrBadFrame)
}

func TestBackChainPPC64(t *testing.T) {
	m := testutil.NewSparseMemory()
	le := func(a, v uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		m.Write(a, b[:])
	}
	const sp0, kt = 0xc000000003c1f000, 0xc000000000100000
	opt := Options{Target: memory.Target{ByteOrder: binary.LittleEndian}, KernelStart: 0xc000000000000000}
	// Three frames: each keeps the caller's sp at 0 and, at 16, the
	// address its function returns to (saved by its callee); the first
	// frame's may be stale (the kernel prints it "unreliable").
	le(sp0, sp0+0x100)
	le(sp0+16, kt+0x10)
	le(sp0+0x100, sp0+0x200)
	le(sp0+0x100+16, kt+0x20)
	le(sp0+0x200, 0x3ffffc8cdd10) // the user's r1
	le(sp0+0x200+16, kt+0x30)
	// An interrupt frame ("REGS" at 32, pt_regs at 48) of a system call
	// from user space: msr has PR set.
	le(sp0+0x200+32, 0x53474552)
	le(sp0+0x200+48+32*8, 0x100bd1f8)
	le(sp0+0x200+48+33*8, 0x800000000280f033)
	fr, stop := BackChainPPC64(m, 0xffff010, sp0, opt)
	assert.True(t, stop.Final, stop.String())
	assert.Contains(t, stop.String(), "user space")
	assert.Equal(t, []uint64{0xffff010, kt + 0x10, kt + 0x20, kt + 0x30}, pcs(fr))

	// An interrupt in the kernel (pre-6.2 "regshere" at 96, pt_regs at
	// 112): the interrupted nip is a frame, and the walk goes on.
	le(sp0+0x200+32, 0)
	le(sp0+0x200, sp0+0x300)
	le(sp0+0x200+96, 0x7265677368657265)
	le(sp0+0x200+112+32*8, kt+0x40)
	le(sp0+0x200+112+33*8, 0x8000000000009033)
	le(sp0+0x300, 0)
	le(sp0+0x300+16, kt+0x50)
	fr, stop = BackChainPPC64(m, kt+4, sp0, opt)
	assert.True(t, stop.Final, stop.String())
	assert.Equal(t, []uint64{kt + 4, kt + 0x10, kt + 0x20, kt + 0x30, kt + 0x40, kt + 0x50}, pcs(fr))

	// A stale first saved link register that is no instruction address
	// (seen in RTAS: 0xc0000000ffffefff) is left out, not shown as a
	// frame; a later one ends the walk as damage.
	le(sp0+16, 0xc0000000ffffefff)
	fr, stop = BackChainPPC64(m, kt+4, sp0, opt)
	assert.True(t, stop.Final, stop.String())
	assert.Equal(t, []uint64{kt + 4, kt + 0x20, kt + 0x30, kt + 0x40, kt + 0x50}, pcs(fr))
	le(sp0+0x100+16, kt+0x22)
	fr, stop = BackChainPPC64(m, kt+4, sp0, opt)
	assert.ErrorIs(t, stop.Err, ErrBadFrame)
	assert.Equal(t, []uint64{kt + 4}, pcs(fr))
	le(sp0+16, kt+0x10)
	le(sp0+0x100+16, kt+0x20)

	// A loop.
	le(sp0+0x100, sp0)
	_, stop = BackChainPPC64(m, kt+4, sp0, opt)
	assert.ErrorIs(t, stop.Err, ErrBadFrame)
	// An unsaved frame; a misaligned or user stack pointer.
	_, stop = BackChainPPC64(m, kt+4, sp0+0x10000, opt)
	assert.ErrorIs(t, stop.Err, memory.ErrNotSaved)
	for _, sp := range []uint64{sp0 + 8, 0x3ffffc8cdd10} {
		_, stop = BackChainPPC64(m, kt+4, sp, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame, "%#x", sp)
	}
}

// TestFramePointerRISCV64Exception: a CPU stopped in an interrupt handler
// on its IRQ stack, called through call_on_irq_stack and do_irq from the
// trap entry, which interrupted the idle loop on the task stack: the walk
// crosses the struct pt_regs to the interrupted epc and s0 and goes on to
// the end of the task stack, marking the frame it read from pt_regs.
func TestFramePointerRISCV64Exception(t *testing.T) {
	const (
		entry  = text + 0x8000 // handle_exception … ret_from_exception_end
		regs   = stack + 0x3000
		ptSize = 288   // PT_SIZE_ON_STACK
		status = 0x120 // SPP, SPIE: a trap from supervisor mode
	)
	opt := Options{Target: le64, KernelStart: text, UserEnd: 1 << 63, RecordBelow: true,
		ExceptionEntry: Range{Start: entry, End: entry + 0x1ba}}
	// record writes the frame record of frame pointer fp: {next, ra} below it.
	record := func(m *testutil.SparseMemory, fp, next, ra uint64) {
		m.PutU64(fp-16, next)
		m.PutU64(fp-8, ra)
	}
	ptRegs := func(m *testutil.SparseMemory, epc, ra, sp, s0, st uint64) {
		m.PutU64(regs, epc)
		m.PutU64(regs+8, ra)
		m.PutU64(regs+16, sp)
		m.PutU64(regs+64, s0)
		m.PutU64(regs+256, st)
		m.PutU64(regs+272, 0x8000000000000001) // cause: a software interrupt (IPI)
	}
	const irqFP, coiFP = irqStk + 0x3f80, regs - 0x30
	idle := []uint64{stack + 0x3200, stack + 0x3300, stack + 0x3f00}
	build := func() *testutil.SparseMemory {
		m := testutil.NewSparseMemory()
		record(m, irqFP, coiFP, text+0x10)       // handle_riscv_irq, on the IRQ stack
		record(m, coiFP, regs, text+0x20)        // call_on_irq_stack's record, on the task stack
		record(m, regs, regs+ptSize, entry+0x40) // do_irq: s0 = the entry's sp = pt_regs; its saved s0 the interrupted sp
		ptRegs(m, text+0x300, text+0x999, regs+ptSize, idle[0], status)
		record(m, idle[0], idle[1], text+0x310)
		record(m, idle[1], idle[2], text+0x320)
		record(m, idle[2], 0, 0)
		return m
	}
	want := []uint64{text + 4, text + 0x10, text + 0x20, entry + 0x40, text + 0x300, text + 0x310, text + 0x320}

	t.Run("idle loop", func(t *testing.T) {
		fr, stop := FramePointer(build(), text+4, irqFP, opt)
		assert.True(t, stop.Final, stop.String())
		assert.Equal(t, want, pcs(fr))
		for i, f := range fr {
			if i == 4 {
				assert.Equal(t, uint64(regs), f.Regs, "the interrupted pc's frame names its pt_regs")
			} else {
				assert.Zero(t, f.Regs, "frame %d", i)
			}
		}
	})
	t.Run("no entry range", func(t *testing.T) {
		o := opt
		o.ExceptionEntry = Range{}
		fr, stop := FramePointer(build(), text+4, irqFP, o)
		// The walk of issue 27: the entry's s0 (the interrupted sp) taken
		// for a frame pointer, whose "record" is pt_regs' cause, orig_a0.
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Equal(t, want[:4], pcs(fr))
	})
	t.Run("leaf interrupted", func(t *testing.T) {
		m := build()
		leaf := uint64(stack + 0x3180)
		ptRegs(m, text+0x300, text+0x305, regs+ptSize, leaf, status)
		m.PutU64(leaf-16, 0xdead)
		m.PutU64(leaf-8, idle[0]) // the leaf saved s0 alone, in the ra slot
		fr, stop := FramePointer(m, text+4, irqFP, opt)
		assert.True(t, stop.Final, stop.String())
		assert.Equal(t, []uint64{text + 4, text + 0x10, text + 0x20, entry + 0x40, text + 0x300, text + 0x305, text + 0x310, text + 0x320}, pcs(fr))
	})
	t.Run("trap from user mode", func(t *testing.T) {
		m := build()
		ptRegs(m, 0xb5926, 0xb0000, 0x7ffffd7b96f0, 0x7ffffd7b9700, 0x200000020) // SPP clear
		fr, stop := FramePointer(m, text+4, irqFP, opt)
		assert.True(t, stop.Final, stop.String())
		assert.Contains(t, stop.Why, "user mode")
		assert.Equal(t, want[:4], pcs(fr))
	})
	t.Run("pt_regs not in the dump", func(t *testing.T) {
		m := testutil.NewSparseMemory()
		record(m, irqFP, coiFP, text+0x10)
		record(m, coiFP, regs+0x1000, text+0x20)
		record(m, regs+0x1000, regs, entry+0x40) // pt_regs on the next page, unsaved
		fr, stop := FramePointer(m, text+4, irqFP, opt)
		assert.ErrorIs(t, stop.Err, memory.ErrNotSaved)
		assert.Contains(t, stop.Err.Error(), "pt_regs")
		assert.Equal(t, want[:4], pcs(fr))
	})
	t.Run("epc outside the kernel", func(t *testing.T) {
		m := build()
		ptRegs(m, 0x1000, text+0x999, regs+ptSize, idle[0], status)
		fr, stop := FramePointer(m, text+4, irqFP, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Equal(t, want[:4], pcs(fr))
	})
	t.Run("epc outside kernel text", func(t *testing.T) {
		o := opt
		o.Text = []Range{{Start: text, End: text + 0x10000}}
		fr, stop := FramePointer(build(), text+4, irqFP, o)
		assert.True(t, stop.Final, "in text: %s", stop)
		assert.Equal(t, want, pcs(fr))
		m := build()
		ptRegs(m, stack+0x40, text+0x999, regs+ptSize, idle[0], status) // a stack address
		fr, stop = FramePointer(m, text+4, irqFP, o)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Contains(t, stop.Err.Error(), "not kernel text")
		assert.Equal(t, want[:4], pcs(fr))
	})
	t.Run("s0 off the interrupted stack", func(t *testing.T) {
		for _, s0 := range []uint64{regs + 0x10, irqStk + 0x3f90} { // below sp; another stack
			m := build()
			ptRegs(m, text+0x300, text+0x999, regs+ptSize, s0, status)
			fr, stop := FramePointer(m, text+4, irqFP, opt)
			assert.ErrorIs(t, stop.Err, ErrBadFrame, "%#x", s0)
			assert.Equal(t, want[:4], pcs(fr))
		}
	})
	t.Run("s0 zero", func(t *testing.T) {
		m := build()
		ptRegs(m, text+0x300, text+0x999, regs+ptSize, 0, status)
		fr, stop := FramePointer(m, text+4, irqFP, opt)
		assert.True(t, stop.Final, stop.String())
		assert.Equal(t, want[:5], pcs(fr))
	})
	t.Run("a loop through pt_regs", func(t *testing.T) {
		// The interrupted frame's record leads back to the IRQ stack's
		// first frame: each round trip is two stack changes.
		m := build()
		record(m, idle[0], irqFP, text+0x310)
		fr, stop := FramePointer(m, text+4, irqFP, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.LessOrEqual(t, len(fr), 6*(4+1), "MaxStacks (4) bounds the round trips")
	})
	t.Run("frame limit", func(t *testing.T) {
		o := opt
		o.MaxFrames = 5
		fr, stop := FramePointer(build(), text+4, irqFP, o)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Len(t, fr, 5)
	})
}
