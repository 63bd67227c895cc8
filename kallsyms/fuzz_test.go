package kallsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// fuzzGap is how far after the start of text FuzzDecode's tables sit: room
// for the banner (with its decoy digit run) and little more, so a scan
// crosses a few pages, not the 2 MiB of a real image, and an exec stays
// short.
const fuzzGap = 0x2000

// fuzzSyms is the size of FuzzDecode's kernels: two blocks of names, the
// fewest a scan accepts (minScanMarkers), in tables of a few KiB.
const fuzzSyms = 300

// fuzzRaw in FuzzDecode's mode byte makes the input the tables themselves
// instead of edits to the well-formed ones.
const fuzzRaw = 0x80

// Caps on FuzzDecode's input, in edits and in raw tables. Bytes past a
// cap are ignored, so the minimizer cuts them first.
const (
	fuzzMaxEdits = 128
	fuzzMaxRaw   = 512
)

// FuzzDecode feeds hostile tables to the decoder: they replace the region
// holding the tables of a small synthetic kernel, located through
// VMCOREINFO and by scanning. The input edits the kernel's well-formed
// tables (testutil.FuzzPatch), or with fuzzRaw in mode is the tables.
// Edits keep inputs to a few bytes, so the fuzzer reaches deep checks and
// minimizes each new input in moments instead of spending
// -fuzzminimizetime on kilobytes of table. An error must come with no
// result; a result must be fully iterable, lazily too.
func FuzzDecode(f *testing.F) {
	seeds := []gen{gens[0], gens[1], gens[5], gens[7]}
	type world struct {
		s      *synth
		pre    []byte // the image before the tables, shared by every exec
		tables []byte
	}
	var ws []world
	for _, g := range seeds {
		s := buildGap(g, makeSyms(g, fuzzSyms), fuzzGap)
		tab := s.labels["kallsyms_num_syms"]
		if a, ok := s.labels["kallsyms_offsets"]; ok && a < tab {
			tab = a
		}
		at := tab - s.mem.base
		ws = append(ws, world{s, s.mem.data[:at:at], s.mem.data[at:]})
	}
	load := func(w world, scanIt, lazy bool, tables []byte) (*Result, error) {
		// pre has no spare capacity: append copies, and the shared
		// prefix is never written.
		m := &memMap{base: w.s.mem.base, data: append(w.pre, tables...)}
		info := w.s.info
		if scanIt {
			info = w.s.infoBare
		}
		return Load(m, info, Options{Target: memory.Target{ByteOrder: w.s.g.bo, PtrSize: w.s.g.ptr}, Lazy: lazy, ImageEnd: w.s.mem.base + uint64(len(m.data))})
	}
	for i, w := range ws {
		for _, scanIt := range []bool{false, true} {
			// The seeds must decode, or the fuzzer starts from nothing.
			if res, err := load(w, scanIt, false, w.tables); err != nil || res.Layout.NumSyms != len(w.s.syms) {
				f.Fatalf("seed %s (scan %v): %v", w.s.g.name, scanIt, err)
			}
			f.Add(uint8(i), scanIt, []byte(nil))
		}
	}
	// Edits at the markers, names and token_index of the first kernel.
	w0 := ws[0]
	for _, label := range []string{"kallsyms_markers", "kallsyms_names", "kallsyms_token_index"} {
		off := w0.s.labels[label] - w0.s.mem.base - uint64(len(w0.pre))
		f.Add(uint8(0), true, []byte{0, 0, byte(off >> 8), byte(off), 4, 0xff, 0xff, 0xff, 0x7f})
	}
	f.Add(uint8(fuzzRaw), false, w0.tables[:64])
	f.Fuzz(func(t *testing.T, mode uint8, scanIt bool, data []byte) {
		w := ws[int(mode&^fuzzRaw)%len(ws)]
		tables := data[:min(len(data), fuzzMaxRaw)]
		if mode&fuzzRaw == 0 {
			tables = testutil.FuzzPatch(w.tables, data[:min(len(data), fuzzMaxEdits)])
		}
		for _, lazy := range []bool{false, true} {
			res, err := load(w, scanIt, lazy, tables)
			if err != nil {
				if res != nil {
					t.Fatal("error with a result")
				}
				continue
			}
			n := 0
			_ = res.Finder().Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { n++; return true })
			_ = res.Finder().Find(symfinder.Query{Kind: symfinder.ByName, Name: "_stext"}, func(symfinder.Symbol) bool { return true })
			_ = res.Finder().Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: w.s.stext + 5}, func(symfinder.Symbol) bool { return true })
			if !lazy && n != res.Layout.NumSyms {
				t.Fatalf("iterated %d of %d symbols", n, res.Layout.NumSyms)
			}
		}
	})
}
