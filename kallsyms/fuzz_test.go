package kallsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// FuzzDecode feeds arbitrary table bytes to the decoder: the fuzzer's
// bytes replace the region holding the tables of a small synthetic kernel,
// located through VMCOREINFO and by scanning. An error must come with no
// result; a result must be fully iterable, lazily too.
func FuzzDecode(f *testing.F) {
	seeds := []gen{gens[0], gens[1], gens[5], gens[7]}
	var ss []*synth
	for _, g := range seeds {
		s := build(g, makeSyms(g, 700))
		ss = append(ss, s)
	}
	for i, s := range ss {
		tab := s.labels["kallsyms_num_syms"]
		if a, ok := s.labels["kallsyms_offsets"]; ok && a < tab {
			tab = a
		}
		f.Add(uint8(i), false, s.mem.data[tab-s.mem.base:])
		f.Add(uint8(i), true, s.mem.data[tab-s.mem.base:])
	}
	f.Fuzz(func(t *testing.T, which uint8, scanIt bool, data []byte) {
		s := ss[int(which)%len(ss)]
		tab := s.labels["kallsyms_num_syms"]
		if a, ok := s.labels["kallsyms_offsets"]; ok && a < tab {
			tab = a
		}
		img := append([]byte(nil), s.mem.data[:tab-s.mem.base]...)
		m := &memMap{base: s.mem.base, data: append(img, data...)}
		info := s.info
		if scanIt {
			info = s.infoBare
		}
		for _, lazy := range []bool{false, true} {
			res, err := Load(m, info, Options{ByteOrder: s.g.bo, PtrSize: s.g.ptr, Lazy: lazy, ImageEnd: s.mem.base + uint64(len(m.data))})
			if err != nil {
				if res != nil {
					t.Fatal("error with a result")
				}
				continue
			}
			n := 0
			_ = res.Finder().Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { n++; return true })
			_ = res.Finder().Find(symfinder.Query{Kind: symfinder.ByName, Name: "_stext"}, func(symfinder.Symbol) bool { return true })
			_ = res.Finder().Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: s.stext + 5}, func(symfinder.Symbol) bool { return true })
			if !lazy && n != res.Layout.NumSyms {
				t.Fatalf("iterated %d of %d symbols", n, res.Layout.NumSyms)
			}
		}
	})
}
