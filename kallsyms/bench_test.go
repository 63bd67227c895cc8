package kallsyms

import (
	"sync"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

var (
	benchOnce sync.Once
	benchS    *synth
)

// benchSynth is a 200k-symbol 6.12-style kernel.
func benchSynth() *synth {
	benchOnce.Do(func() {
		g := gens[5]
		benchS = build(g, makeSyms(g, 200_000))
	})
	return benchS
}

// BenchmarkExpand is a whole Load from memory already in RAM.
func BenchmarkExpand(b *testing.B) {
	s := benchSynth()
	b.SetBytes(int64(len(s.names)))
	b.ReportAllocs()
	var ix *symfinder.Index
	for b.Loop() {
		res, err := Load(s.mem, s.info, Options{})
		if err != nil {
			b.Fatal(err)
		}
		ix = res.Index
	}
	b.ReportMetric(float64(ix.MemoryBytes()-len(namesBytes(ix)))/float64(ix.Len()), "index-B/sym")
}

func namesBytes(ix *symfinder.Index) []byte {
	var n []byte
	for i := range ix.Len() {
		n = append(n, ix.Kind(i))
		n = append(n, ix.NameBytes(i)...)
	}
	return n
}

// BenchmarkCopyNames is the floor BenchmarkExpand is measured against: a
// plain copy of the same expanded names bytes.
func BenchmarkCopyNames(b *testing.B) {
	s := benchSynth()
	res, err := Load(s.mem, s.info, Options{})
	if err != nil {
		b.Fatal(err)
	}
	src := namesBytes(res.Index)
	b.SetBytes(int64(len(s.names)))
	b.ReportAllocs()
	for b.Loop() {
		dst := make([]byte, len(src))
		copy(dst, src)
	}
}

func BenchmarkLazyOpen(b *testing.B) {
	s := benchSynth()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(s.mem, s.info, Options{Lazy: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchFinders(b *testing.B) (symfinder.Finder, symfinder.Finder, *synth) {
	s := benchSynth()
	w, err := Load(s.mem, s.info, Options{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := Load(s.mem, s.info, Options{Lazy: true})
	if err != nil {
		b.Fatal(err)
	}
	return w.Index, l.Lazy, s
}

// queries returns 4096 symbols of s in a scattered order, so a lookup
// benchmark reads its queries from a small array instead of the 10 MB
// symbol list.
func queries(s *synth) []sym {
	q := make([]sym, 4096)
	for i := range q {
		q[i] = s.syms[(i*7919)%len(s.syms)]
	}
	return q
}

func BenchmarkByAddr(b *testing.B) {
	w, l, s := benchFinders(b)
	qs := queries(s)
	for _, f := range []struct {
		name string
		f    symfinder.Finder
	}{{"expanded", w}, {"lazy", l}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				y := &qs[i%len(qs)]
				i++
				_ = f.f.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: y.addr + 3}, func(symfinder.Symbol) bool { return false })
			}
		})
	}
}

func BenchmarkByName(b *testing.B) {
	w, l, s := benchFinders(b)
	qs := queries(s)
	for _, f := range []struct {
		name string
		f    symfinder.Finder
	}{{"expanded", w}, {"lazy", l}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			// The first lookup builds the by-name order; time the rest.
			_ = f.f.Find(symfinder.Query{Kind: symfinder.ByName, Name: "_stext"}, func(symfinder.Symbol) bool { return false })
			i := 0
			for b.Loop() {
				y := &qs[i%len(qs)]
				i++
				_ = f.f.Find(symfinder.Query{Kind: symfinder.ByName, Name: y.name}, func(symfinder.Symbol) bool { return false })
			}
		})
	}
}

// corpusBench is the largest corpus kernel (Debian 6.12 amd64, 166,932
// symbols) with every page a whole Load reads copied into RAM, so that the
// benchmarks below time decoding, not the dump's page cache.
type corpusBench struct {
	mem  *testutil.SparseMemory
	info *vmcoreinfo.Info
	opt  Options
}

var (
	corpusBenchOnce sync.Once
	corpusBenchS    *corpusBench
	corpusBenchErr  error
)

const corpusBenchGuest = "deb13-6.12-amd64"

func loadCorpusBench(b *testing.B) *corpusBench {
	g := testutil.CorpusGuestNamed(b, corpusBenchGuest)
	dumps := g.AvailableDumps()
	if len(dumps) == 0 {
		b.Skipf("no dump of %s in reach: run testdata/vmcores/generate", corpusBenchGuest)
	}
	corpusBenchOnce.Do(func() {
		corpusBenchS, corpusBenchErr = newCorpusBench(g, dumps[0])
	})
	if corpusBenchErr != nil {
		b.Fatal(corpusBenchErr)
	}
	return corpusBenchS
}

func newCorpusBench(g *testutil.CorpusGuest, f testutil.DumpFormat) (*corpusBench, error) {
	paths, _ := g.DumpPaths(f)
	d, err := vmcore.Open(paths...)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	k, err := d.Kernel()
	if err != nil {
		return nil, err
	}
	opt := Options{Target: memory.Target{ByteOrder: d.Arch().ByteOrder, PtrSize: d.Arch().PtrSize}}
	rec := memory.NewRecorder(k, 12)
	if _, err := Load(rec, d.Info(), opt); err != nil {
		return nil, err
	}
	mem := testutil.NewSparseMemory()
	page := make([]byte, 4096)
	for _, pfn := range rec.Pages() {
		if err := memory.ReadFull(k, page, pfn<<12); err != nil {
			return nil, err
		}
		mem.Write(pfn<<12, page)
	}
	return &corpusBench{mem: mem, info: d.Info(), opt: opt}, nil
}

// BenchmarkCorpus measures the largest real kernel of the corpus: "expand"
// is a whole Load, "copy" a plain copy of the expanded names (type letters
// included) it produces, and the lookups query every 41st symbol. The
// index's memory is reported before and after its first lookup by name.
func BenchmarkCorpus(b *testing.B) {
	c := loadCorpusBench(b)
	res, err := Load(c.mem, c.info, c.opt)
	if err != nil {
		b.Fatal(err)
	}
	ix := res.Index
	names := namesBytes(ix)
	b.Run("expand", func(b *testing.B) {
		b.SetBytes(int64(len(names)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Load(c.mem, c.info, c.opt); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(ix.MemoryBytes()-len(names))/float64(ix.Len()), "index-B/sym")
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(names)))
		b.ReportAllocs()
		for b.Loop() {
			dst := make([]byte, len(names))
			copy(dst, names)
		}
	})
	var qs []symfinder.Symbol
	for i := 0; i < ix.Len(); i += 41 {
		qs = append(qs, ix.Symbol(i))
	}
	b.Run("ByAddr", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s := &qs[i%len(qs)]
			i++
			_ = ix.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: s.Addr + s.Size/2}, func(symfinder.Symbol) bool { return false })
		}
	})
	b.Run("ByName", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s := &qs[i%len(qs)]
			i++
			_ = ix.Find(symfinder.Query{Kind: symfinder.ByName, Name: s.Name}, func(symfinder.Symbol) bool { return false })
		}
		b.ReportMetric(float64(ix.MemoryBytes()-len(names))/float64(ix.Len()), "index-B/sym")
	})
}
