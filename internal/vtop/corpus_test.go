package vtop_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleNameOffset is offsetof(struct module, name) on x86_64 since v2.6:
// enum module_state state (4 bytes + 4 padding), struct list_head list (16).
const moduleNameOffset = 24

// TestCorpus checks translation on a real dump of every corpus guest
// (testdata/vmcores): linux_banner holds `uname -r`, every loaded module's
// struct module (its __this_module symbol) names it, and every text symbol
// of /proc/kallsyms translates, the walk agreeing with the fast paths.
// It reads the guest's one dump (every format with KDUMP_SYMS_THOROUGH=1):
// the walk reads the same physical memory whatever the container, which
// vmcore's TestCorpusSamePages compares across formats, and
// TestSessionCorpus translates through every format.
// It opens dumps through vmcore, which vtop cannot import: an external test.
func TestCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("corpus dumps are slow to open; skipped with -short")
	}
	ran := false
	for _, g := range testutil.Corpus(t) {
		t.Run(g.Name, func(t *testing.T) {
			formats := g.SampleDumps()
			if len(formats) == 0 {
				g.RequireDump(t, testutil.DumpQEMUELF) // skips with the generate hint
			}
			syms := g.Kallsyms(t)
			names := namesOf(syms) // once per guest, for every format
			mods := g.Modules(t)
			uname := g.Uname(t)
			for _, f := range formats {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					d, err := vmcore.Open(paths...)
					require.NoError(t, err)
					defer d.Close()
					tr, err := d.Translator()
					require.NoError(t, err)
					ran = true
					checkDump(t, tr, syms, names, mods, uname, g.IsExtract(f), g.Arch(), g.ExpectModules())
					if testing.Verbose() {
						t.Logf("%s/%s:\n%s", g.Name, f, tr.Describe())
					}
				})
			}
		})
	}
	if !ran {
		t.Log("no corpus dump was available: run testdata/vmcores/generate")
	}
}

// symbolNames indexes a guest's /proc/kallsyms for checkDump: vmlinux
// symbols by name (the last of a name wins) and each module's
// __this_module.
type symbolNames struct {
	byName, thisModule map[string]uint64
}

func namesOf(syms []testutil.KallsymsEntry) symbolNames {
	n := symbolNames{byName: make(map[string]uint64, len(syms)), thisModule: map[string]uint64{}}
	for _, s := range syms {
		if s.Module == "" {
			n.byName[s.Name] = s.Addr
		} else if s.Name == "__this_module" {
			n.thisModule[s.Module] = s.Addr
		}
	}
	return n
}

// checkDump checks translation against the ground truth. An extract (see
// testutil.IsExtract) holds only the pages symbol decoding reads and the
// page tables of every symbol: reads of other data, and walks through the
// kernel-text tables the fast path spares, may fail there as not saved.
func checkDump(t *testing.T, tr vtop.Translator, syms []testutil.KallsymsEntry, names symbolNames, mods []testutil.ProcModule, uname string, extract bool, arch string, fullKallsyms bool) {
	absent := func(err error) bool { return extract && errors.Is(err, memory.ErrNotSaved) }
	byName, thisModule := names.byName, names.thisModule

	// ppc64 and s390x: every module's text lies in a module area the
	// translation names (what the module scan reads without the modules
	// symbol).
	if arch == "ppc64el" || arch == "s390x" {
		areas := tr.Layout().Modules
		require.NotEmpty(t, areas)
		for _, m := range mods {
			in := false
			for _, r := range areas {
				in = in || m.Addr >= r[0] && m.Addr < r[1]
			}
			assert.True(t, in, "module %s at %#x outside the module areas %#x", m.Name, m.Addr, areas)
		}
	}

	// Data symbols need CONFIG_KALLSYMS_ALL (not in Debian's arm64 6.1).
	if banner, ok := byName["linux_banner"]; ok {
		if s, err := memory.CString(tr, banner, 512); !absent(err) {
			require.NoError(t, err)
			assert.Contains(t, s, uname)
		}
	} else {
		require.False(t, fullKallsyms, "linux_banner in ground truth")
	}
	// arm64 unmaps the freed __init region (text and exit text) after boot.
	initLo, initHi := byName["__init_begin"], byName["__init_end"]
	if initHi == 0 {
		initLo, initHi = byName["_sinittext"], byName["_einittext"]
	}
	freedInit := func(s testutil.KallsymsEntry, err error) bool {
		return arch == "arm64" && s.Module == "" && s.Addr >= initLo && s.Addr < initHi && errors.Is(err, vtop.ErrNotMapped)
	}
	unmapped := 0

	// page_offset_base found by the walk equals the kernel's variable.
	if pob, ok := byName["page_offset_base"]; ok {
		if v, err := memory.Uint64(tr, binary.LittleEndian, pob); !absent(err) { // the corpus is amd64 only for now
			require.NoError(t, err)
			assert.Equal(t, v, tr.Layout().DirectMap, "page_offset_base")
		}
	}

	require.NotEmpty(t, mods)
	for _, m := range mods {
		addr, ok := thisModule[m.Name]
		if !ok && !fullKallsyms {
			// Module data symbols need KALLSYMS_ALL too: the module's
			// base (its text) at least is mapped.
			if _, err := tr.Translate(m.Addr); !absent(err) {
				assert.NoError(t, err, m.Name)
			}
			continue
		}
		if !assert.True(t, ok, "__this_module of %s", m.Name) {
			continue
		}
		name, err := memory.CString(tr, addr+moduleNameOffset, 56)
		if assert.NoError(t, err, m.Name) {
			assert.Equal(t, m.Name, name)
		}
	}

	var bad []string
	text, walked := 0, 0
	for i, s := range syms {
		if s.Type != 't' && s.Type != 'T' {
			continue
		}
		text++
		pa, err := tr.Translate(s.Addr)
		if freedInit(s, err) {
			unmapped++
			continue
		}
		// Extracts lack the page tables of what decoding did not reach:
		// modules when their list cannot be found (no KALLSYMS_ALL).
		if absent(err) && s.Module != "" && !fullKallsyms {
			continue
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%#x %s [%s]: %v", s.Addr, s.Name, s.Module, err))
			continue
		}
		if i%37 == 0 { // a sample through the walk alone
			walked++
			wpa, err := vtop.WalkForTest(tr, s.Addr)
			if absent(err) || freedInit(s, err) {
				continue
			}
			if err != nil || wpa != pa {
				bad = append(bad, fmt.Sprintf("%#x %s: walk %#x (%v), translate %#x", s.Addr, s.Name, wpa, err, pa))
			}
		}
	}
	if arch == "arm64" {
		checkARM64Image(t, tr, byName, extract)
	}
	assert.Empty(t, bad, "%d of %d text symbols failed; first: %s", len(bad), text, strings.Join(bad[:min(len(bad), 10)], "\n"))
	t.Logf("%d text symbols translated (%d also walked, %d in the unmapped init region), %d modules named", text, walked, unmapped, len(mods))
}

// checkARM64Image cross-checks the kernel-image fast path (va −
// kimage_voffset) with the walk: it starts at _text where the page tables
// map the image head (6.12) and at _stext where they do not (6.1), the page
// below it does not walk to the same rule, and on a full dump every page
// of it walks to the same address except one run of unmapped pages, the
// __init region freed after boot.
func checkARM64Image(t *testing.T, tr vtop.Translator, byName map[string]uint64, extract bool) {
	var f vtop.FastPath
	for _, p := range tr.Layout().FastPaths {
		if strings.HasPrefix(p.Name, "kernel image") {
			f = p
		}
	}
	require.NotZero(t, f.Start, "kernel image fast path in %v", tr.Layout().FastPaths)
	ps := uint64(tr.Layout().PageSize)
	exact := func(va uint64) (bool, error) {
		pa, err := vtop.WalkForTest(tr, va)
		return err == nil && pa == va-f.Delta, err
	}
	stext := byName["_stext"]
	require.NotZero(t, stext)
	if text, ok := byName["_text"]; ok {
		if ok, err := exact(text); ok {
			assert.Equal(t, text, f.Start, "image head is mapped: the fast path starts at _text")
		} else if !extract || !errors.Is(err, memory.ErrNotSaved) {
			assert.Equal(t, stext, f.Start, "image head not mapped (%v): the fast path starts at _stext", err)
		}
	}
	assert.True(t, f.Start == stext || f.Start < stext && stext-f.Start <= 2<<20, "fast path start %#x, _stext %#x", f.Start, stext)
	if ok, _ := exact(f.Start - ps); ok {
		t.Errorf("page %#x below the image fast path [%#x, %#x] walks to va − kimage_voffset too", f.Start-ps, f.Start, f.Last)
	}
	if extract {
		return
	}
	var runs [][2]uint64
	for va := f.Start; va <= f.Last && va >= f.Start; va += ps {
		ok, err := exact(va)
		if ok {
			continue
		}
		if !errors.Is(err, vtop.ErrNotMapped) {
			t.Errorf("image page %#x: fast path %#x, walk: %v", va, va-f.Delta, err)
			return
		}
		if n := len(runs); n > 0 && runs[n-1][1] == va {
			runs[n-1][1] = va + ps
		} else {
			runs = append(runs, [2]uint64{va, va + ps})
		}
	}
	initLo, initHi := byName["__init_begin"], byName["__init_end"]
	if assert.Len(t, runs, 1, "unmapped runs in the image fast path: %#x", runs) {
		assert.Equal(t, initLo, runs[0][0], "the unmapped run starts at __init_begin")
		if initHi != 0 {
			assert.Equal(t, initHi, runs[0][1], "the unmapped run ends at __init_end")
		}
		t.Logf("image fast path [%#x, %#x]: walk agrees on every page but the freed init region [%#x, %#x)", f.Start, f.Last, runs[0][0], runs[0][1])
	}
}

// TestCorpusS390X checks the s390x walk on the real dump: every module
// lies in vmalloc space, outside every fast path, and its base and its
// struct module (named at moduleNameOffset, as on x86_64) translate through
// the walk alone; on a full dump every page of both fast paths walks to
// the fast path's answer (the KERNELOFFPHYS rule of v6.10+ confirmed). It
// reads the guest's one dump (every format with KDUMP_SYMS_THOROUGH=1):
// TestCorpus translates through every format.
func TestCorpusS390X(t *testing.T) {
	ran := false
	for _, g := range testutil.Corpus(t) {
		if g.Arch() != "s390x" {
			continue
		}
		for _, f := range g.SampleDumps() {
			t.Run(g.Name+"/"+string(f), func(t *testing.T) {
				paths, _ := g.DumpPaths(f)
				d, err := vmcore.Open(paths...)
				require.NoError(t, err)
				defer d.Close()
				tr, err := d.Translator()
				require.NoError(t, err)
				ran = true
				l := tr.Layout()
				require.Positive(t, l.Levels, tr.Describe())
				thisModule := map[string]uint64{}
				for _, s := range g.Kallsyms(t) {
					if s.Name == "__this_module" {
						thisModule[s.Module] = s.Addr
					}
				}
				for _, m := range g.Modules(t) {
					for _, p := range l.FastPaths {
						assert.False(t, m.Addr >= p.Start && m.Addr <= p.Last, "module %s at %#x in fast path %s", m.Name, m.Addr, p.Name)
					}
					pa, err := vtop.WalkForTest(tr, m.Addr)
					require.NoError(t, err, m.Name)
					tpa, err := tr.Translate(m.Addr)
					require.NoError(t, err, m.Name)
					assert.Equal(t, pa, tpa)
					if tm, ok := thisModule[m.Name]; ok { // KALLSYMS_ALL
						name, err := memory.CString(tr, tm+moduleNameOffset, 56)
						require.NoError(t, err, m.Name)
						assert.Equal(t, m.Name, name)
					}
				}
				checkS390XMapped(t, tr, g.Modules(t), g.IsExtract(f))
				if g.IsExtract(f) {
					return
				}
				for _, p := range l.FastPaths {
					bad := 0
					for va := p.Start; va <= p.Last && va >= p.Start; va += 4096 {
						pa, err := vtop.WalkForTest(tr, va)
						if err != nil || pa != va-p.Delta {
							if bad++; bad <= 3 {
								t.Errorf("%s page %#x: walk %#x (%v), fast path %#x", p.Name, va, pa, err, va-p.Delta)
							}
						}
					}
					t.Logf("%s [%#x, %#x]: %d pages differ from the walk", p.Name, p.Start, p.Last, bad)
				}
			})
		}
	}
	if !ran {
		t.Skip("no s390x corpus dump")
	}
}

// checkS390XMapped lists the page tables' mapped runs of the 2 GiB
// blocks that hold the modules: every module's base (/proc/modules) is in
// a run and, on a full dump, the first and last byte of every run walks
// and the byte after it does not.
func checkS390XMapped(t *testing.T, tr vtop.Translator, mods []testutil.ProcModule, extract bool) {
	require.NotEmpty(t, mods)
	lo, hi := ^uint64(0), uint64(0)
	for _, m := range mods {
		lo, hi = min(lo, m.Addr), max(hi, m.Addr+m.Size)
	}
	lo &^= 1<<31 - 1
	hi = (hi + 1<<31 - 1) &^ (1<<31 - 1)
	var runs [][2]uint64
	require.NoError(t, tr.(vtop.Mapper).Mapped(lo, hi, func(s, e uint64) bool {
		runs = append(runs, [2]uint64{s, e})
		return true
	}))
	in := func(a uint64) bool {
		for _, r := range runs {
			if a >= r[0] && a < r[1] {
				return true
			}
		}
		return false
	}
	for _, m := range mods {
		assert.True(t, in(m.Addr), "module %s base %#x in no mapped run of [%#x, %#x)", m.Name, m.Addr, lo, hi)
	}
	if !extract {
		for _, r := range runs {
			for _, a := range []uint64{r[0], r[1] - 1} {
				_, err := vtop.WalkForTest(tr, a)
				assert.NoError(t, err, "%#x in mapped run [%#x, %#x)", a, r[0], r[1])
			}
			if r[1] < hi {
				_, err := vtop.WalkForTest(tr, r[1])
				assert.ErrorIs(t, err, vtop.ErrNotMapped, "%#x after mapped run [%#x, %#x)", r[1], r[0], r[1])
			}
		}
	}
	t.Logf("[%#x, %#x): %d mapped runs", lo, hi, len(runs))
}

// TestIssue13ImageSizeCorpus replays a kernel before ≈v4.20, whose
// VMCOREINFO has no NUMBER(KERNEL_IMAGE_SIZE), on real KASLR dumps whose
// image lies above 0xffffffffa0000000 (deb11-5.10-amd64 and
// deb13-6.12-amd64): without the line, translation must still give what it
// gives with it, for the top-level table's walk and every text symbol.
func TestIssue13ImageSizeCorpus(t *testing.T) {
	ran := false
	for _, g := range testutil.Corpus(t) {
		if g.Arch() != "amd64" {
			continue
		}
		paths, ok := g.DumpPaths(testutil.DumpQEMUELF)
		if !ok {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			d, err := vmcore.Open(paths...)
			require.NoError(t, err)
			defer d.Close()
			full, err := d.Translator()
			require.NoError(t, err)
			var lines []string
			for l := range strings.SplitSeq(string(d.VMCOREINFO()), "\n") {
				if !strings.HasPrefix(l, "NUMBER(KERNEL_IMAGE_SIZE)=") {
					lines = append(lines, l)
				}
			}
			in, err := vmcoreinfo.Parse([]byte(strings.Join(lines, "\n")))
			require.NoError(t, err)
			_, ok := in.Number("KERNEL_IMAGE_SIZE")
			require.False(t, ok)
			tr, err := vtop.New(vtop.Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: d.Physical()})
			require.NoError(t, err)
			ran = true
			require.Equal(t, 4, tr.Layout().Levels, "walk on: %s", tr.Describe())
			n := 0
			for _, s := range g.Kallsyms(t) {
				if s.Type != 't' && s.Type != 'T' {
					continue
				}
				want, werr := full.Translate(s.Addr)
				got, err := tr.Translate(s.Addr)
				switch {
				case werr != nil:
					if err == nil {
						t.Errorf("%s %#x: translates to %#x without the line, fails with it: %v", s.Name, s.Addr, got, werr)
					}
					continue
				case err != nil:
					t.Errorf("%s %#x: %v", s.Name, s.Addr, err)
				case got != want:
					t.Errorf("%s %#x: %#x without the line, %#x with it", s.Name, s.Addr, got, want)
				}
				n++
			}
			t.Logf("%d text symbols translate as with NUMBER(KERNEL_IMAGE_SIZE); %s", n, tr.Layout().Notes)
		})
	}
	if !ran {
		t.Skip("no amd64 corpus dump")
	}
}
