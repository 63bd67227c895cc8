package tasks

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTable is a made-up 64-bit task_struct and signal_struct.
const testTable = `
sizeof(task_struct) = 256
task_struct.tasks = 0:16
task_struct.pid = 16:4
task_struct.tgid = 20:4
task_struct.__state = 24:4
task_struct.exit_state = 28:4
task_struct.comm = 32:16
task_struct.real_parent = 48:8
task_struct.on_cpu = 56:4
task_struct.cpu = 60:4
task_struct.stack = 64:8
task_struct.flags = 72:4
task_struct.signal = 80:8
task_struct.thread_node = 96:16
signal_struct.thread_head = 0:16
`

const (
	base     = 0xffff888000000000
	taskSize = 256
)

var le = binary.LittleEndian

// fakeKernel is kernel memory of made-up tasks: task i's task_struct at
// base+i*taskSize; signal_structs from base+0x80000.
type fakeKernel struct {
	mem     []byte
	nsig    int
	sigBase uint64 // where the signal_structs go
}

// newFake has room for 16 tasks, then the signal_structs, so that the
// whole of a small kernel is a fuzz seed.
func newFake() *fakeKernel { return &fakeKernel{mem: make([]byte, 8192), sigBase: base + 16*taskSize} }

func (k *fakeKernel) task(i int) uint64 { return base + uint64(i)*taskSize }

func (k *fakeKernel) put64(addr, v uint64) { le.PutUint64(k.mem[addr-base:], v) }
func (k *fakeKernel) put32(addr uint64, v uint32) {
	le.PutUint32(k.mem[addr-base:], v)
}

// link makes a circular list of the list_heads at nodes (nodes[0] the head).
func (k *fakeKernel) link(nodes ...uint64) {
	for i, n := range nodes {
		next, prev := nodes[(i+1)%len(nodes)], nodes[(i+len(nodes)-1)%len(nodes)]
		k.put64(n, next)
		k.put64(n+8, prev)
	}
}

// setTask writes task i's fields.
func (k *fakeKernel) setTask(i int, pid, tgid int32, comm string, state uint32, parent int, flags uint32) {
	t := k.task(i)
	k.put32(t+16, uint32(pid))
	k.put32(t+20, uint32(tgid))
	k.put32(t+24, state)
	copy(k.mem[t+32-base:t+48-base], comm+"\x00")
	k.put64(t+48, k.task(parent))
	k.put64(t+64, 0xffffc90000000000+uint64(i)<<14)
	k.put32(t+72, flags)
}

// group gives a thread group (leader first) a signal_struct and links it.
func (k *fakeKernel) group(threads ...int) { k.groupAt(threads...) }

func (k *fakeKernel) groupAt(threads ...int) {
	sig := k.sigBase + uint64(k.nsig)*64
	k.nsig++
	nodes := []uint64{sig}
	for _, i := range threads {
		k.put64(k.task(i)+80, sig)
		nodes = append(nodes, k.task(i)+96)
	}
	k.link(nodes...)
}

func (k *fakeKernel) reader() memory.Reader {
	return memory.ReaderFunc(func(p []byte, addr uint64) (int, error) {
		if addr < base || addr-base >= uint64(len(k.mem)) {
			return 0, memory.Fault(addr, "kernel", "read", memory.ErrNotSaved)
		}
		n := copy(p, k.mem[addr-base:])
		if n < len(p) {
			return n, memory.Fault(addr+uint64(n), "kernel", "read", memory.ErrNotSaved)
		}
		return n, nil
	})
}

func testLayout(t testing.TB) *Layout {
	tab, err := btflayout.ParseTable(strings.NewReader(testTable), "test table")
	require.NoError(t, err)
	l, err := NewLayout(tab)
	require.NoError(t, err)
	return l
}

func (k *fakeKernel) opts(t testing.TB) Options {
	return Options{
		Target: memory.Target{ByteOrder: le, PtrSize: 8, PageSize: 4096},
		Layout: testLayout(t),
		Symbol: func(name string) (uint64, bool) {
			if name == "init_task" {
				return k.task(0), true
			}
			return 0, false
		},
	}
}

// standard makes init_task (0), init (1, pid 1), kthreadd (2, pid 2), and
// a process of three threads (3, 4, 5: pids 100, 101, 102).
func standard() *fakeKernel {
	k := newFake()
	k.setTask(0, 0, 0, "swapper/0", 0, 0, pfKthread|2)
	k.setTask(1, 1, 1, "init", 0, 0, 0)
	k.setTask(2, 2, 2, "kthreadd", 1, 0, pfKthread)
	k.setTask(3, 100, 100, "app", 0x402, 1, 0)
	k.setTask(4, 101, 100, "app-worker", 0x102, 1, 0)
	k.setTask(5, 102, 100, "app-stopped", 4, 1, 0)
	k.put32(k.task(1)+56, 1) // init on its CPU
	k.link(k.task(0), k.task(1), k.task(2), k.task(3))
	k.group(0)
	k.group(1)
	k.group(2)
	k.group(3, 4, 5)
	return k
}

type row struct {
	pid, ppid int32
	comm      string
	state     byte
}

func rows(l *List) []row {
	var out []row
	for _, t := range l.Tasks {
		out = append(out, row{t.PID, t.PPID, t.Comm, t.State})
	}
	return out
}

func TestRead(t *testing.T) {
	k := standard()
	l, err := Read(k.reader(), k.opts(t))
	require.NoError(t, err)
	assert.Empty(t, l.Problems)
	assert.Equal(t, []row{
		{0, 0, "swapper/0", 'R'}, {1, 0, "init", 'R'}, {2, 0, "kthreadd", 'S'},
		{100, 1, "app", 'I'}, {101, 1, "app-worker", 'D'}, {102, 1, "app-stopped", 'T'},
	}, rows(l))
	assert.True(t, l.Tasks[0].Idle)
	assert.True(t, l.Tasks[1].OnCPU)
	assert.False(t, l.Tasks[2].OnCPU)
	assert.True(t, l.Tasks[2].Kernel())
	assert.Equal(t, int32(100), l.Tasks[4].TGID)
}

func TestReadLoop(t *testing.T) {
	k := standard()
	// app's tasks.next goes back to init: the list loops.
	k.put64(k.task(3), k.task(1))
	l, err := Read(k.reader(), k.opts(t))
	require.NoError(t, err)
	assert.Len(t, l.Tasks, 6)
	require.Len(t, l.Problems, 1)
	assert.Contains(t, l.Problems[0].Error(), "init_task.tasks loops")
	assert.ErrorIs(t, l.Err(), memory.ErrCorrupt)
}

func TestReadBrokenLink(t *testing.T) {
	k := standard()
	// init's tasks.next points outside the kernel: the rest is found
	// walking back from the head.
	k.put64(k.task(1), 0xdead000000000000)
	l, err := Read(k.reader(), k.opts(t))
	require.NoError(t, err)
	assert.Len(t, l.Tasks, 6)
	require.Len(t, l.Problems, 1)
	assert.ErrorIs(t, l.Problems[0], memory.ErrNotSaved)
	assert.Contains(t, l.Problems[0].Error(), "reading task_struct at 0xdead000000000000")
}

func TestReadBadComm(t *testing.T) {
	k := standard()
	copy(k.mem[k.task(4)+32-base:], "bad\nname\x00")
	copy(k.mem[k.task(5)+32-base:], "0123456789abcdef") // no NUL
	l, err := Read(k.reader(), k.opts(t))
	require.NoError(t, err)
	assert.Len(t, l.Tasks, 6)
	assert.Equal(t, "bad\nname", l.Tasks[4].Comm)
	assert.Equal(t, "0123456789abcdef", l.Tasks[5].Comm)
	assert.Len(t, l.Problems, 2)
}

func TestReadLimit(t *testing.T) {
	k := standard()
	o := k.opts(t)
	o.MaxTasks = 4
	l, err := Read(k.reader(), o)
	require.NoError(t, err)
	assert.Len(t, l.Tasks, 4)
	require.Len(t, l.Problems, 1)
	assert.Contains(t, l.Problems[0].Error(), "more than 4 tasks")
}

func TestReadNoInitTask(t *testing.T) {
	k := standard()
	o := k.opts(t)
	o.Symbol = func(string) (uint64, bool) { return 0, false }
	_, err := Read(k.reader(), o)
	assert.Error(t, err)
}

func TestNewLayoutMissing(t *testing.T) {
	tab, err := btflayout.ParseTable(strings.NewReader(strings.Replace(testTable, "task_struct.comm = 32:16\n", "", 1)), "t")
	require.NoError(t, err)
	_, err = NewLayout(tab)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "comm")
	assert.True(t, errors.Is(err, btflayout.ErrNotFound))
}

func TestStateLetter(t *testing.T) {
	for _, c := range []struct {
		state, exit uint64
		want        byte
	}{
		{0, 0, 'R'},
		{taskInterruptible, 0, 'S'},
		{taskUninterruptible, 0, 'D'},
		{taskUninterruptible | 0x100, 0, 'D'}, // TASK_KILLABLE
		{taskUninterruptible | 0x100 | 0x2000, 0, 'D'},
		{taskIdle, 0, 'I'},
		{taskStopped | 0x100, 0, 'T'},
		{taskTraced, 0, 't'},
		{0x80, exitDead, 'X'},
		{0x80, exitZombie, 'Z'},
		{taskParked, 0, 'P'},
		{taskFrozen, 0, 'D'},
		{taskRTLockWait, 0, 'D'},
		{0x200, 0, 'R'}, // TASK_WAKING is not reported
	} {
		assert.Equal(t, string(c.want), string(StateLetter(c.state, c.exit)), "state %#x exit %#x", c.state, c.exit)
	}
}

func FuzzRead(f *testing.F) {
	k := standard()
	f.Add(k.mem)
	k.put64(k.task(3), k.task(1)) // a loop
	f.Add(k.mem)
	f.Fuzz(func(t *testing.T, data []byte) {
		// Memory is the data alone: every read past it faults.
		k := &fakeKernel{mem: append([]byte(nil), data...), sigBase: base + 16*taskSize}
		o := k.opts(t)
		o.MaxTasks = 1000
		l, err := Read(k.reader(), o)
		if err != nil {
			return
		}
		if len(l.Tasks) > 1000 {
			t.Fatalf("%d tasks over the limit", len(l.Tasks))
		}
	})
}

func TestReadListsLeadBack(t *testing.T) {
	k := standard()
	// Every task in one thread group: each leader's thread list walks
	// every task again.
	k.group(0, 1, 2, 3, 4, 5)
	o := k.opts(t)
	o.MaxTasks = 6
	l, err := Read(k.reader(), o)
	require.NoError(t, err)
	assert.Len(t, l.Tasks, 6)
	require.Len(t, l.Problems, 1)
	assert.Contains(t, l.Problems[0].Error(), "more than 24 list nodes followed")
}
