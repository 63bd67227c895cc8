package modsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// BenchmarkCorpusLoad loads every module of each real dump once the layouts
// are resolved (the BTF is parsed outside the loop).
func BenchmarkCorpusLoad(b *testing.B) {
	ran := false
	for _, g := range testutil.Corpus(b) {
		paths, ok := g.DumpPaths(testutil.DumpQEMUELF)
		if !ok || !g.ExpectModules() {
			continue // no BTF or module list in reach without KALLSYMS_ALL
		}
		ran = true
		b.Run(g.Name, func(b *testing.B) {
			d, err := vmcore.Open(paths...)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			k, err := d.Kernel()
			if err != nil {
				b.Fatal(err)
			}
			syms := truthSymbols(g.Kallsyms(b))
			start, _ := syms("__start_BTF")
			stop, _ := syms("__stop_BTF")
			src, err := btflayout.FromMemory(k, start, stop)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				set, err := Load(k, syms, Options{Target: d.Arch().Target, Layout: src})
				if err != nil || len(set.Modules()) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
	if !ran {
		b.Skip("no corpus dump cached: run testdata/vmcores/generate")
	}
}

// BenchmarkCorpusBTF reads and parses the BTF of a real dump and resolves
// the structs modsyms uses.
func BenchmarkCorpusBTF(b *testing.B) {
	for _, g := range testutil.Corpus(b) {
		paths, ok := g.DumpPaths(testutil.DumpQEMUELF)
		if !ok {
			continue
		}
		d, err := vmcore.Open(paths...)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		k, err := d.Kernel()
		if err != nil {
			b.Fatal(err)
		}
		syms := truthSymbols(g.Kallsyms(b))
		start, _ := syms("__start_BTF")
		stop, _ := syms("__stop_BTF")
		b.ReportAllocs()
		for b.Loop() {
			src, err := btflayout.FromMemory(k, start, stop)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := resolveLayout(src, 8); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.Skip("no corpus dump cached: run testdata/vmcores/generate")
}
