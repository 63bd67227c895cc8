package tasks

import (
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSwitchFrame(t *testing.T) {
	k := &fakeKernel{mem: make([]byte, 1<<20), sigBase: base + 16*taskSize}
	stack := uint64(base + 0x10000)
	tk := &Task{Addr: base + 0x20000, PID: 7, Stack: stack}
	sp := stack + 0x3f00
	k.put64(tk.Addr+200, sp)
	k.put64(sp+40, 0xffff888000011111) // bp
	k.put64(sp+48, 0xffffffff81234567) // ret_addr
	l := testLayout(t)
	l.sp = field{"thread.sp", 200, 8}
	l.frameBP, l.frameRet, l.frameSize = field{"bp", 40, 8}, field{"ret_addr", 48, 8}, 56
	tgt := memory.Target{ByteOrder: le, PtrSize: 8}
	fr, err := l.SwitchFrame(k.reader(), tgt, tk, 16<<10)
	require.NoError(t, err)
	assert.Equal(t, SwitchFrame{IP: 0xffffffff81234567, SP: sp + 56, BP: 0xffff888000011111}, fr)

	// An sp outside the task's stack, or a frame that would cross its end.
	for _, sp := range []uint64{stack - 8, stack + 16<<10 - 8, 0xffffffffffffffff} {
		k.put64(tk.Addr+200, sp)
		_, err := l.SwitchFrame(k.reader(), tgt, tk, 16<<10)
		assert.ErrorIs(t, err, memory.ErrCorrupt, "sp %#x", sp)
	}
	// A stack page not in the dump.
	tk.Stack = 0xffffc90000000000
	k.put64(tk.Addr+200, 0xffffc90000000100)
	_, err = l.SwitchFrame(k.reader(), tgt, tk, 16<<10)
	assert.ErrorIs(t, err, memory.ErrNotSaved)

	// No inactive_task_frame in the layouts.
	_, err = testLayout(t).SwitchFrame(k.reader(), tgt, tk, 16<<10)
	assert.ErrorIs(t, err, ErrNoSwitchFrame)
}

func TestCPUContext(t *testing.T) {
	tab, err := btflayout.ParseTable(strings.NewReader(testTable), "t")
	require.NoError(t, err)
	l, err := NewLayout(tab)
	require.NoError(t, err)
	l.ctxFP, l.ctxSP, l.ctxPC = field{"fp", 160, 8}, field{"sp", 168, 8}, field{"pc", 176, 8}
	k := standard()
	stack := uint64(base + 0x10000)
	tk := &Task{Addr: k.task(1), PID: 1, Stack: stack}
	k.put64(tk.Addr+160, stack+0x3e00)
	k.put64(tk.Addr+168, stack+0x3d00)
	k.put64(tk.Addr+176, 0xffff800080001234)
	tgt := memory.Target{ByteOrder: le, PtrSize: 8}
	c, err := l.CPUContext(k.reader(), tgt, tk, 16<<10)
	require.NoError(t, err)
	assert.Equal(t, CPUContext{FP: stack + 0x3e00, SP: stack + 0x3d00, PC: 0xffff800080001234}, c)
	k.put64(tk.Addr+168, 0x1000)
	_, err = l.CPUContext(k.reader(), tgt, tk, 16<<10)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	_, err = testLayout(t).CPUContext(k.reader(), tgt, tk, 16<<10)
	assert.ErrorIs(t, err, ErrNoCPUContext)
}
