package bpfsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// BenchmarkCorpusLoad loads each pseudo-module source of every corpus
// guest's QEMU dump once the BTF is parsed (outside the loop, as a session
// shares it): layout resolution, the list walk and the index.
func BenchmarkCorpusLoad(b *testing.B) {
	ran := false
	for _, g := range testutil.Corpus(b) {
		paths, ok := g.DumpPaths(testutil.DumpQEMUELF)
		if !ok || !g.ExpectModules() {
			continue // no BTF to find without KALLSYMS_ALL (Debian arm64 6.1)
		}
		ran = true
		cd := openCorpusDump(b, paths)
		start, _ := cd.syms("__start_BTF")
		stop, _ := cd.syms("__stop_BTF")
		src, err := btflayout.FromMemory(cd.kmem, start, stop)
		if err != nil {
			b.Fatal(err)
		}
		opt := cd.opt
		opt.Layout = src
		for _, l := range []struct {
			name string
			load func(memory.Reader, Symbols, Options) (*Set, error)
		}{{"ftrace", LoadFtrace}, {"bpf", LoadBPF}, {"kprobes", LoadKprobes}} {
			b.Run(g.Name+"/"+l.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s, err := l.load(cd.kmem, cd.syms, opt)
					if err != nil || s == nil {
						b.Fatal(err)
					}
				}
			})
		}
		// The same with the dump's BTF read and parsed in the loop: what a
		// session pays on first use when no other source parsed it.
		b.Run(g.Name+"/bpf-with-btf", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := LoadBPF(cd.kmem, cd.syms, cd.opt)
				if err != nil || s.Len() == 0 {
					b.Fatal(err)
				}
			}
		})
	}
	if !ran {
		b.Skip("no corpus dump cached: run testdata/vmcores/generate")
	}
}
