package kdumpsyms_test

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/tasks"
)

// BenchmarkTasksWalk is the task walk alone on the corpus zlib kdump
// files, the dump open and its BTF decoded once (kdump-syms ps spends most
// of its time decoding the BTF: see BenchmarkPs in cmd/kdump-syms).
func BenchmarkTasksWalk(b *testing.B) {
	ran := false
	for _, g := range testutil.Corpus(b) {
		for _, f := range []testutil.DumpFormat{testutil.DumpZlib, testutil.DumpQEMUKdumpZlib} {
			paths, ok := g.DumpPaths(f)
			if !ok {
				continue
			}
			s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, paths...)
			if err != nil {
				b.Fatal(err)
			}
			list, err := s.Tasks()
			if err != nil {
				s.Close()
				continue
			}
			kmem, _ := s.Kernel()
			k, _ := s.Kallsyms()
			opt := tasks.Options{Target: s.Dump().Arch().Target, Layout: list.Layout, Symbol: modsyms.FromFinder(k.Finder())}
			ran = true
			b.Run(g.Name+"/"+string(f), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := tasks.Read(kmem, opt); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(list.Tasks)), "tasks")
			})
			s.Close()
		}
	}
	if !ran {
		b.Skip("no corpus zlib kdump with a task list")
	}
}
