package tasks

import (
	"testing"
)

// BenchmarkRead10k lists 10,000 made-up tasks (5,000 processes of two
// threads): the walk's cost per task, without a dump's page decoding.
func BenchmarkRead10k(b *testing.B) {
	const n = 10000
	k := &fakeKernel{mem: make([]byte, 4<<20), sigBase: base + 3<<20}
	k.setTask(0, 0, 0, "swapper/0", 0, 0, pfKthread|2)
	leaders := []uint64{k.task(0)}
	k.group(0)
	for i := 1; i <= n; i += 2 {
		k.setTask(i, int32(i), int32(i), "proc", 1, 0, 0)
		k.setTask(i+1, int32(i+1), int32(i), "thread", 1, 0, 0)
		leaders = append(leaders, k.task(i))
		k.groupAt(i, i+1)
	}
	k.link(leaders...)
	o := k.opts(b)
	o.Symbol = func(name string) (uint64, bool) { return k.task(0), name == "init_task" }
	b.ReportAllocs()
	for b.Loop() {
		l, err := Read(k.reader(), o)
		if err != nil || len(l.Tasks) != n+1 || len(l.Problems) != 0 {
			b.Fatalf("%d tasks, %v, %v", len(l.Tasks), err, l.Err())
		}
	}
}
