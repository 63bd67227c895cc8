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

// A synthetic 32-bit ARM kernel: text at aText with five functions and the
// end-of-text sentinel, its index at aIdx and .ARM.extab at aTab; a module
// with one function; an 8 KiB stack at aStack.
const (
	aText  = 0xc0100000
	aIdx   = 0xc0800000
	aTab   = 0xc0810000
	aStack = 0xd0a10000
	aMod   = 0xbf000000
	aModIx = 0xbf001000
)

var le32 = memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}

// prel31Of encodes target as a prel31 word at slot.
func prel31Of(slot, target uint64) uint32 { return uint32(target-slot) & 0x7fffffff }

// putIdx writes index entry i of the table at idx: the function fn and
// the second word w (ignored when tab is set: then a prel31 offset to tab).
func putIdx(m *testutil.SparseMemory, idx uint64, i int, fn uint64, w uint32, tab uint64) {
	a := idx + 8*uint64(i)
	m.PutU32(a, prel31Of(a, fn))
	if tab != 0 {
		w = prel31Of(a+4, tab)
	}
	m.PutU32(a+4, w)
}

// armKernel writes the synthetic kernel's index and tables:
//
//	f0 aText+0x000: inline "vsp += 8; pop {r4, r14}; finish"
//	f1 aText+0x100: extab, routine 1: "pop {r7, r14}"
//	f2 aText+0x200: extab, routine 2, one more word: "pop {r0-r3}; pop {r4-r15}" (an exception frame)
//	f3 aText+0x300: EXIDX_CANTUNWIND (entry code)
//	f4 aText+0x400: inline "refuse to unwind"
//	   aText+0x500: the end of the text, EXIDX_CANTUNWIND
func armKernel(m *testutil.SparseMemory) ARMTables {
	putIdx(m, aIdx, 0, aText, 0x8001a8b0, 0)
	putIdx(m, aIdx, 1, aText+0x100, 0, aTab)
	m.PutU32(aTab, 0x81008408)
	putIdx(m, aIdx, 2, aText+0x200, 0, aTab+0x10)
	m.PutU32(aTab+0x10, 0x8201b10f)
	m.PutU32(aTab+0x14, 0x8fffb0b0)
	putIdx(m, aIdx, 3, aText+0x300, 1, 0)
	putIdx(m, aIdx, 4, aText+0x400, 0x808000b0, 0)
	putIdx(m, aIdx, 5, aText+0x500, 1, 0)
	// The module: one function, "pop {r4, r14}".
	putIdx(m, aModIx, 0, aMod, 0x80a8b0b0, 0)
	return ARMTables{
		Vmlinux:   ARMIndex{Start: aIdx, Stop: aIdx + 6*8},
		InVmlinux: func(a uint64) bool { return a >= aText && a <= aText+0x500 },
		LoadModules: func() ([]ARMIndex, error) {
			return []ARMIndex{{Name: "m", Start: aModIx, Stop: aModIx + 8, TextStart: aMod, TextEnd: aMod + 0x100}}, nil
		},
	}
}

func armRegs(pc, sp, lr uint64) []uint64 {
	r := make([]uint64, 18)
	r[armPC], r[armSP], r[armLR], r[armCPSR] = pc, sp, lr, armModeSVC
	return r
}

func TestARM(t *testing.T) {
	m := testutil.NewSparseMemory()
	tabs := armKernel(m)
	opt := Options{Target: le32, KernelStart: 0xbf000000, StackSize: 8 << 10}
	sp := uint64(aStack + 0x100)
	// f0's frame: 8 bytes, r4, lr into f1.
	m.PutU32(sp+8, 0x44)
	m.PutU32(sp+12, aText+0x104)
	// f1's: r7, lr into f2 (a return address at f2's end).
	m.PutU32(sp+16, 0x77)
	m.PutU32(sp+20, aText+0x2a0)
	// f2's exception frame: r0–r15, pc the first instruction of f4's
	// neighbour f1 (interrupted at a function's entry: pc = lr), lr into f3.
	regsAt := sp + 24
	for i := range 16 {
		m.PutU32(regsAt+4*uint64(i), uint32(i))
	}
	m.PutU32(regsAt+4*13, uint32(regsAt+0x48))
	m.PutU32(regsAt+4*14, aText+0x30c)
	m.PutU32(regsAt+4*15, aText+0x100)

	fr, stop := ARM(m, armRegs(aText+0x10, sp, 0), tabs, opt)
	assert.Equal(t, []uint64{aText + 0x10, aText + 0x104, aText + 0x2a0, aText + 0x100, aText + 0x30c}, pcs(fr))
	assert.True(t, stop.Final, "%v", stop)
	assert.Contains(t, stop.Why, "EXIDX_CANTUNWIND")

	t.Run("noreturn call", func(t *testing.T) {
		// f0 returns to f1's first instruction (a call to a noreturn
		// function ending f0): looked up one byte back, its caller is f0
		// itself, whose frame gives f3.
		nsp := uint64(aStack + 0x400)
		m.PutU32(nsp+12, aText+0x100)
		m.PutU32(nsp+16+12, aText+0x30c)
		fr, stop := ARM(m, armRegs(aText+0x10, nsp, 0), tabs, opt)
		assert.Equal(t, []uint64{aText + 0x10, aText + 0x100, aText + 0x30c}, pcs(fr))
		assert.True(t, stop.Final, "%v", stop)
	})

	t.Run("module", func(t *testing.T) {
		m.PutU32(sp, 0x44)
		m.PutU32(sp+4, aText+0x310)
		calls := 0
		tb := tabs
		load := tb.LoadModules
		tb.LoadModules = func() ([]ARMIndex, error) { calls++; return load() }
		fr, stop := ARM(m, armRegs(aMod+0x20, sp, 0), tb, opt)
		assert.Equal(t, []uint64{aMod + 0x20, aText + 0x310}, pcs(fr))
		assert.True(t, stop.Final, "%v", stop)
		assert.Equal(t, 1, calls)
		tb.LoadModules = func() ([]ARMIndex, error) { return nil, errors.New("no list") }
		_, stop = ARM(m, armRegs(aMod+0x20, sp, 0), tb, opt)
		assert.ErrorIs(t, stop.Err, ErrARMUnwind)
		assert.ErrorContains(t, stop.Err, "no list")
	})

	t.Run("at entry", func(t *testing.T) {
		// The first instruction: nothing pushed, pc = lr.
		fr, stop := ARM(m, armRegs(aText+0x100, sp, aText+0x30c), tabs, opt)
		assert.Equal(t, []uint64{aText + 0x100, aText + 0x30c}, pcs(fr))
		assert.True(t, stop.Final)
		_, stop = ARM(m, armRegs(aText+0x100, sp, aText+0x100), tabs, opt)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		// lr set to entry code's label (vector_swi's ret_fast_syscall):
		// the end of the stack, not a call from the function before it.
		fr, stop = ARM(m, armRegs(aText+0x100, sp, aText+0x300), tabs, opt)
		assert.Equal(t, []uint64{aText + 0x100, aText + 0x300}, pcs(fr))
		assert.True(t, stop.Final, "%v", stop)
	})

	t.Run("irq vector", func(t *testing.T) {
		r := armRegs(0xffff0018, 0xc1000000, aText+0x14)
		r[armCPSR] = 0x600001d2
		fr, stop := ARM(m, r, tabs, opt)
		assert.Equal(t, []uint64{0xffff0018, aText + 0x10}, pcs(fr))
		assert.ErrorIs(t, stop.Err, ErrBankedSP)
	})

	t.Run("user mode", func(t *testing.T) {
		r := armRegs(0x10000, 0x7fff0000, 0)
		r[armCPSR] = armModeUSR
		fr, stop := ARM(m, r, tabs, opt)
		assert.Len(t, fr, 1)
		assert.True(t, stop.Final)
	})

	t.Run("refuse", func(t *testing.T) {
		fr, stop := ARM(m, armRegs(aText+0x404, sp, 0), tabs, opt)
		assert.Len(t, fr, 1)
		assert.ErrorIs(t, stop.Err, ErrARMUnwind)
		assert.ErrorContains(t, stop.Err, "refuse")
	})

	t.Run("below the text", func(t *testing.T) {
		tb := tabs
		tb.InVmlinux = nil
		_, stop := ARM(m, armRegs(aText-4, sp, 0), tb, opt)
		assert.ErrorIs(t, stop.Err, ErrARMUnwind)
	})

	t.Run("loop", func(t *testing.T) {
		// f1 at a return address pops a lr that returns to itself with
		// the stack pointer moving back down.
		lp := uint64(aStack + 0x200)
		m.PutU32(lp, 0)
		m.PutU32(lp+4, aText+0x104)
		fr, stop := ARM(m, armRegs(aText+0x104, lp, 0), tabs, Options{Target: le32, KernelStart: 0xbf000000, StackSize: 8 << 10, MaxFrames: 16})
		require.NotNil(t, stop.Err)
		assert.LessOrEqual(t, len(fr), 16)
	})

	t.Run("index damage", func(t *testing.T) {
		for name, tb := range map[string]ARMTables{
			"empty":    {Vmlinux: ARMIndex{Start: aIdx, Stop: aIdx}},
			"odd":      {Vmlinux: ARMIndex{Start: aIdx, Stop: aIdx + 5}},
			"huge":     {Vmlinux: ARMIndex{Start: 0, Stop: 1 << 31}},
			"unmapped": {Vmlinux: ARMIndex{Start: 0xe0000000, Stop: 0xe0000100}},
		} {
			fr, stop := ARM(m, armRegs(aText+0x10, sp, 0), tb, opt)
			assert.Len(t, fr, 1, name)
			assert.Error(t, stop.Err, name)
		}
	})

	t.Run("no target", func(t *testing.T) {
		fr, stop := ARM(m, armRegs(aText+0x10, sp, 0), tabs, Options{})
		assert.Empty(t, fr)
		assert.ErrorIs(t, stop.Err, memory.ErrUnknownTarget)
	})
}

func TestARMOpcodes(t *testing.T) {
	m := testutil.NewSparseMemory()
	w := armWalker{kmem: m, bo: binary.LittleEndian}
	var r [16]uint32
	r[armSP], r[armLR], r[11] = aStack, aText+0x40, aStack+0x80
	for i := range 32 {
		m.PutU32(aStack+4*uint64(i), uint32(0x1000+i))
	}
	for _, c := range []struct {
		name string
		ops  []byte
		sp   uint32
		pc   uint32
		ret  bool
		err  error
	}{
		{"vsp+", []byte{0x3f}, aStack + 0x100, aText + 0x40, true, nil},
		{"vsp-", []byte{0x40}, aStack - 4, aText + 0x40, true, nil},
		{"vsp=r11", []byte{0x9b}, aStack + 0x80, aText + 0x40, true, nil},
		{"pop r4-r6,lr", []byte{0xaa}, aStack + 16, 0x1003, true, nil},
		{"pop r4,pc", []byte{0x88, 0x01}, aStack + 8, 0x1001, false, nil},
		{"pop sp", []byte{0x82, 0x00}, 0x1000, aText + 0x40, true, nil},
		{"pop r0-r3", []byte{0xb1, 0x0f}, aStack + 16, aText + 0x40, true, nil},
		{"uleb128", []byte{0xb2, 0x81, 0x01}, aStack + 0x204 + 129*4, aText + 0x40, true, nil},
		{"vfp", []byte{0xb3, 0x01, 0xb8, 0xd0, 0xc9, 0x00}, aStack + 20 + 12 + 8 + 8, aText + 0x40, true, nil},
		{"finish", []byte{0xb0, 0x3f}, aStack, aText + 0x40, true, nil},
		{"refuse", []byte{0x80, 0x00}, 0, 0, false, ErrARMUnwind},
		{"reserved", []byte{0x9d}, 0, 0, false, ErrARMUnwind},
		{"spare", []byte{0xb1, 0x10}, 0, 0, false, ErrARMUnwind},
		{"iwmmxt", []byte{0xc0}, 0, 0, false, ErrARMUnwind},
		{"truncated", []byte{0x80}, 0, 0, false, ErrARMUnwind},
		{"long uleb", []byte{0xb2, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, 0, false, ErrARMUnwind},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, ret, err := w.exec(r, c.ops)
			if c.err != nil {
				assert.ErrorIs(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.sp, out[armSP], "sp")
			assert.Equal(t, c.pc, out[armPC], "pc")
			assert.Equal(t, c.ret, ret)
		})
	}
	_, _, err := w.exec([16]uint32{armSP: 0xe0000000}, []byte{0xa0})
	var fe *memory.FaultError
	assert.ErrorAs(t, err, &fe)
}

func TestCompactOps(t *testing.T) {
	ops, err := compactOps(0x8001a8b0, nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{0x01, 0xa8, 0xb0}, ops)
	ops, err = compactOps(0x8201b10f, []uint32{0x8fffb0b0})
	require.NoError(t, err)
	assert.Equal(t, []byte{0xb1, 0x0f, 0x8f, 0xff, 0xb0, 0xb0}, ops)
	_, err = compactOps(0x12345678, nil)
	assert.ErrorIs(t, err, ErrARMUnwind)
	_, err = compactOps(0x83000000, nil)
	assert.ErrorIs(t, err, ErrARMUnwind)
}
