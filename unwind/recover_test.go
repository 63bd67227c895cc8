package unwind

import (
	"encoding/binary"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// putCall writes a 5-byte call rel32 to target ending at ret.
func putCall(m *testutil.SparseMemory, ret, target uint64) {
	var b [5]byte
	b[0] = 0xe8
	binary.LittleEndian.PutUint32(b[1:], uint32(int32(int64(target-ret))))
	m.Write(ret-5, b[:])
}

// captureWorld is a kdump capture's crashing stack in miniature: an entry
// from user space (kText), a syscall function (+0x100) calling a
// panic-like function (+0x200, rbp saved), calling a crash function
// (+0x300 to +0x400) whose registers were saved in its body (CFA sp+0xb0)
// with ip at a label past its last instruction, in an undefined entry
// (+0x3f8), as crash_setup_regs leaves them.
type captureWorld struct {
	m    *testutil.SparseMemory
	tabs ORCTables
	cpu  []uint64
	sp   uint64
}

const (
	capCrashFn  = kText + 0x300
	capLabel    = kText + 0x3f8
	capRetPanic = kText + 0x210 // after "call crash function" in the panic-like one
	capRetSys   = kText + 0x110
	capRetEntry = kText + 0x010
)

func newCaptureWorld() *captureWorld {
	m := testutil.NewSparseMemory()
	tabs := orcWorld(m, []orcFn{
		{addr: kText, kind: kindRegs, spReg: orcRegSP},
		{addr: kText + 0x100, kind: kindCall, spReg: orcRegSP, spOff: 8},
		{addr: kText + 0x200, kind: kindCall, spReg: orcRegSP, spOff: 24, bpReg: orcRegPrevSP, bpOff: -16},
		{addr: capCrashFn, kind: kindCall, spReg: orcRegSP, spOff: 8},
		{addr: capCrashFn + 1, kind: kindCall, spReg: orcRegSP, spOff: 16, bpReg: orcRegPrevSP, bpOff: -16},
		{addr: capCrashFn + 8, kind: kindCall, spReg: orcRegSP, spOff: 0xb0, bpReg: orcRegPrevSP, bpOff: -16},
		{addr: capCrashFn + 0xf0, kind: kindCall, spReg: orcRegSP, spOff: 8},
		{addr: capLabel, kind: kindUndefined},
		{addr: kText + 0x400, kind: kindCall, spReg: orcRegSP, spOff: 8}, // another function
		{addr: kText + 0x500, kind: kindUndefined},
	}, ORC64)
	putCall(m, capRetPanic, capCrashFn)
	putCall(m, capRetSys, kText+0x200)
	putCall(m, capRetEntry, kText+0x100)
	sp := kStack + 0x3000
	cfa := sp + 0xb0
	m.PutU64(cfa-16, kStack+0x3f00) // the saved rbp
	m.PutU64(cfa-8, capRetPanic)
	cfa += 24 // the panic-like function's frame
	m.PutU64(cfa-8, capRetSys)
	m.PutU64(cfa, capRetEntry) // the syscall function's CFA is cfa+8
	regs := cfa + 8
	m.PutU64(regs+8*regCS, 0x33)
	m.PutU64(regs+8*regIP, 0x401000)
	cpu := make([]uint64, 27)
	cpu[regIP], cpu[regSP], cpu[regBP] = capLabel, sp, 0x1234
	tabs.Func = func(a uint64) (uint64, uint64, bool) {
		if a >= capCrashFn && a < capCrashFn+0x100 {
			return capCrashFn, capCrashFn + 0x100, true
		}
		return 0, 0, false
	}
	return &captureWorld{m: m, tabs: tabs, cpu: cpu, sp: sp}
}

var captureTrace = []uint64{capLabel, capRetPanic, capRetSys, capRetEntry}

func TestORCRecover(t *testing.T) {
	t.Run("own ORC entries", func(t *testing.T) {
		w := newCaptureWorld()
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		require.True(t, stop.Final, "%s", stop)
		assert.Equal(t, captureTrace, pcs(fr))
		r := fr[1].Recovered
		require.NotNil(t, r)
		assert.Equal(t, RecoverOwnORC, r.Method)
		assert.Equal(t, CallDirect, r.Call)
		assert.Equal(t, w.sp+0xa8, r.Slot)
		assert.False(t, r.Weak)
		assert.ErrorIs(t, r.Cause, ErrBadFrame)
		assert.Contains(t, r.String(), "sp+0xa8")
		for _, f := range fr[2:] {
			assert.Nil(t, f.Recovered)
		}
	})
	t.Run("scan, direct call", func(t *testing.T) {
		// The registers were saved 8 bytes lower than any entry of the
		// function says (something pushed): its own offsets point at the
		// saved rbp, the scan finds the return address.
		w := newCaptureWorld()
		w.cpu[regSP] = w.sp - 8
		w.m.PutU64(w.sp-8, 0)
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		require.True(t, stop.Final, "%s", stop)
		assert.Equal(t, captureTrace, pcs(fr))
		r := fr[1].Recovered
		require.NotNil(t, r)
		assert.Equal(t, RecoverScan, r.Method)
		assert.Equal(t, CallDirect, r.Call)
		assert.False(t, r.Weak)
	})
	t.Run("scan, weak", func(t *testing.T) {
		// No symbols: nothing ties the return address to the function.
		w := newCaptureWorld()
		w.tabs.Func = nil
		// A stale return address below the real one, whose walk fails.
		putCall(w.m, kText+0x410, kText+0x480)
		w.m.PutU64(w.sp+0x20, kText+0x410)
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		require.True(t, stop.Final, "%s", stop)
		assert.Equal(t, captureTrace, pcs(fr))
		r := fr[1].Recovered
		require.NotNil(t, r)
		assert.Equal(t, RecoverScan, r.Method)
		assert.Equal(t, CallElse, r.Call)
		assert.True(t, r.Weak)
		assert.Contains(t, r.String(), "weak")
		assert.Equal(t, 2, r.Tried)
	})
	t.Run("scan, indirect call", func(t *testing.T) {
		// The panic-like function called through a register (call *%rax,
		// ff d0): weak, but taken.
		w := newCaptureWorld()
		w.m.Write(capRetPanic-5, []byte{0x90, 0x90, 0x90, 0xff, 0xd0})
		w.cpu[regSP] = w.sp - 8 // off the function's own offsets
		w.m.PutU64(w.sp-8, 0)
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		require.True(t, stop.Final, "%s", stop)
		assert.Equal(t, captureTrace, pcs(fr))
		r := fr[1].Recovered
		require.NotNil(t, r)
		assert.Equal(t, RecoverScan, r.Method)
		assert.Equal(t, CallIndirect, r.Call)
		assert.True(t, r.Weak)
	})
	t.Run("refused", func(t *testing.T) {
		// The return address into the panic-like function is gone: no
		// frame is invented, and the one into the syscall function
		// above it, after a direct call to another function, is not
		// taken (it would skip the panic-like one).
		w := newCaptureWorld()
		w.m.PutU64(w.sp+0xa8, 0)
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		assert.Equal(t, []uint64{capLabel}, pcs(fr))
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Contains(t, stop.Err.Error(), "is undefined")
		assert.Contains(t, stop.Err.Error(), "no return address on the stack")
	})
	t.Run("loop", func(t *testing.T) {
		// The only return address leads to a function whose CFA is its
		// own sp: the walk from it would go back down its stack.
		w := newCaptureWorld()
		w.tabs.Func = nil
		w.m.PutU64(w.sp+0xa8, 0)
		putCall(w.m, kText+0x410, kText+0x480)
		w.tabs = orcWorld(w.m, []orcFn{
			{addr: kText, kind: kindCall, spReg: orcRegSP, spOff: 8},
			{addr: kText + 0x400, kind: kindCall, spReg: orcRegSP, spOff: 0},
			{addr: kText + 0x500, kind: kindUndefined},
		}, ORC64)
		w.m.PutU64(w.sp+0x40, kText+0x410)
		w.cpu[regIP] = kText + 0x500
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		assert.Len(t, fr, 1)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Contains(t, stop.Err.Error(), "goes back down")
	})
	t.Run("stack page missing", func(t *testing.T) {
		// The page holding the return address is not in the dump.
		w := newCaptureWorld()
		w.cpu[regSP] = kStack + 0x2ff0 // the page below the frame's
		w.m.Drop(kStack+0x3000, 0x1000)
		w.m.PutU64(kStack+0x2ff0, 0)
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		assert.Len(t, fr, 1)
		assert.ErrorIs(t, stop.Err, ErrBadFrame)
		assert.Contains(t, stop.Err.Error(), "cannot be read")
		assert.Contains(t, stop.Err.Error(), "page not present")
	})
	t.Run("ambiguous", func(t *testing.T) {
		// Two of the function's own offsets each lead to a return
		// address that reaches the end of the stack, neither by a direct
		// call to it: refused, not guessed.
		w := newCaptureWorld()
		w.m.Write(capRetPanic-2, []byte{0xff, 0xd0}) // call *%rax
		// Offset 16's slot: a return into the entry code after call
		// *%rax, over a pt_regs from user space.
		w.m.Write(kText+0x16, []byte{0xff, 0xd0})
		w.m.PutU64(w.sp+8, kText+0x18)
		w.m.PutU64(w.sp+16+8*regCS, 0x33)
		fr, stop := ORC(w.m, w.cpu, w.tabs, Options{KernelStart: kText})
		assert.Len(t, fr, 1)
		assert.Contains(t, stop.Err.Error(), "ambiguous")
	})
}
