package kdumpsyms_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// phases counts the session's phases called name.
func phases(s *kdumpsyms.Session, name string) int {
	n := 0
	for _, p := range s.Stats() {
		if p.Name == name {
			n++
		}
	}
	return n
}

// withHoles returns a vmcore option that makes the physical pages in
// holes (4 KiB frame numbers) read as not saved.
func withHoles(holes map[uint64]bool) vmcore.Options {
	return vmcore.Options{WrapPhysical: func(r memory.Reader) memory.Reader {
		return testutil.Holes(r, memory.SpacePhysical, holes)
	}}
}

// TestBTFFoundOnce: the struct layouts, the module walk, the ftrace, BPF
// and kprobes readers, ORC's module tables and BTF share one discovery of
// the dump's BTF: the session's statistics show one "btf" phase. So they
// do when the BTF cannot be read: the layouts are then inferred, and BTF
// returns the failure remembered, without looking again.
func TestBTFFoundOnce(t *testing.T) {
	for _, g := range testutil.Sample(t, "deb13-6.12-amd64") {
		t.Run(g.Name, func(t *testing.T) {
			// With -short, the guest's one dump (testutil.OneDump): what
			// is counted does not depend on the container, and -short
			// decodes no other format of the guest.
			f := testutil.DumpZlib
			if one, ok := g.OneDump(); ok && testing.Short() {
				f = one
			}
			paths := g.RequireDump(t, f)
			everything := func(s *kdumpsyms.Session) {
				s.Modules()
				s.Ftrace()
				s.BPF()
				s.Kprobes()
				s.Layouts()
				s.BTF()
				for _, c := range s.Dump().CPUs() {
					s.Unwind(c.Regs)
				}
			}
			s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
			require.NoError(t, err)
			defer s.Close()
			everything(s)
			_, _, err = s.BTF()
			require.NoError(t, err)
			assert.Equal(t, 1, phases(s, "btf"), "BTF found and decoded more than once")

			// The same dump with the BTF's pages missing.
			start, err := s.Chain().LookupName("__start_BTF")
			require.NoError(t, err)
			stop, err := s.Chain().LookupName("__stop_BTF")
			require.NoError(t, err)
			tr, err := s.Dump().Translator()
			require.NoError(t, err)
			holes := map[uint64]bool{}
			for va := start.Addr &^ 4095; va < stop.Addr; va += 4096 {
				pa, err := tr.Translate(va)
				require.NoError(t, err)
				holes[pa>>12] = true
			}
			s2, err := kdumpsyms.Open(kdumpsyms.Options{Dump: withHoles(holes)}, paths...)
			require.NoError(t, err)
			defer s2.Close()
			everything(s2)
			_, _, err = s2.BTF()
			assert.ErrorIs(t, err, memory.ErrNotSaved)
			_, how, err := s2.Layouts()
			require.NoError(t, err)
			assert.Contains(t, how, "inferred")
			assert.Equal(t, 1, phases(s2, "btf"), "a missing BTF looked for more than once")
		})
	}
}

// TestIssue28ForeignBTF: a BTF given for the struct layouts is checked
// against the dump's modules, not trusted. Before, the 7.2 guest's BTF
// given for the 6.12 dump printed module sizes no module has and lost
// every module symbol without a word; now the modules are refused with a
// FitError naming the field and what it read. The dump's own BTF, given
// the same way, fits.
func TestIssue28ForeignBTF(t *testing.T) {
	btfOf := func(name string) *btflayout.BTF {
		g := testutil.CorpusGuestNamed(t, name)
		paths := g.RequireOneDump(t)
		s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		b, _, err := s.BTF()
		require.NoError(t, err)
		return b
	}
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths := g.RequireOneDump(t)
	for _, tc := range []struct {
		guest string
		fits  bool
	}{{"deb13-6.12-amd64", true}, {"deb14-7.2-amd64", false}, {"deb12-6.1-amd64", false}} {
		t.Run(tc.guest, func(t *testing.T) {
			s, err := kdumpsyms.Open(kdumpsyms.Options{Layout: btfOf(tc.guest)}, paths...)
			require.NoError(t, err)
			defer s.Close()
			set, err := s.Modules()
			if tc.fits {
				require.NoError(t, err)
				require.Len(t, set.Modules(), len(g.Modules(t)))
				return
			}
			assert.Nil(t, set)
			var fe *modsyms.FitError
			require.ErrorAs(t, err, &fe)
			assert.ErrorIs(t, err, memory.ErrCorrupt)
			assert.NotEmpty(t, fe.Field)
			t.Log(err)
		})
	}
}

// TestIssue28ForeignSymbolFile: a /proc/kallsyms copy or System.map the
// caller gives is checked against the dump's own kallsyms on first use: the
// guest's own agrees; another build's fails every query of its finder with
// a FileMismatchError naming a function and both addresses.
func TestIssue28ForeignSymbolFile(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths := g.RequireOneDump(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		guest string
		fits  bool
	}{{"deb13-6.12-amd64", true}, {"deb12-6.1-amd64", false}} {
		t.Run(tc.guest, func(t *testing.T) {
			file := filepath.Join(dir, tc.guest+".kallsyms")
			require.NoError(t, os.WriteFile(file, testutil.CorpusGuestNamed(t, tc.guest).KallsymsText(t), 0o644))
			s, err := kdumpsyms.Open(kdumpsyms.Options{KallsymsFile: file}, paths...)
			require.NoError(t, err)
			defer s.Close()
			fi, ok := s.Chain().Finder(kdumpsyms.FinderKallsymsFile)
			require.True(t, ok)
			var got []symfinder.Symbol
			err = fi.Find(symfinder.Query{Kind: symfinder.ByName, Name: "vfs_write"}, func(sym symfinder.Symbol) bool {
				got = append(got, sym)
				return true
			})
			if tc.fits {
				require.NoError(t, err)
				require.NotEmpty(t, got)
				return
			}
			var fe *kdumpsyms.FileMismatchError
			require.ErrorAs(t, err, &fe)
			assert.ErrorIs(t, err, memory.ErrCorrupt)
			assert.Equal(t, fe.Sampled, fe.Disagree)
			assert.Greater(t, fe.Sampled, 30)
			assert.NotEqual(t, fe.FileAddr, fe.DumpAddr)
		})
	}
}

// TestIssue29LookupMissIsShort: a library Lookup that misses on a dump
// whose module finder could not load returns one short ErrNotFound naming
// that finder, and the finder's error is kept once in Chain.Failures.
func TestIssue29LookupMissIsShort(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb14-7.2-armhf")
	paths := g.RequireOneDump(t)
	// No BTF in this kernel: with layouts from BTF only, modules cannot load.
	s, err := kdumpsyms.Open(kdumpsyms.Options{Layouts: kdumpsyms.LayoutsBTF}, paths...)
	require.NoError(t, err)
	defer s.Close()
	mods := g.Modules(t)
	require.NotEmpty(t, mods)
	for range 3 {
		_, err = s.Chain().Lookup(mods[0].Addr + 0x10)
		require.ErrorIs(t, err, symfinder.ErrNotFound)
		assert.LessOrEqual(t, len(err.Error()), 200, err.Error())
		var nf *symfinder.NotFoundError
		require.ErrorAs(t, err, &nf)
		assert.Contains(t, nf.Unconsulted, kdumpsyms.FinderModules)
	}
	// Each finder that failed, once, however many lookups reached it; the
	// four share one root cause (one NeedsError.Err), which the CLI prints
	// once.
	var names []string
	var roots []error
	for _, f := range s.Chain().Failures() {
		names = append(names, f.Finder)
		var ne *kdumpsyms.NeedsError
		require.ErrorAs(t, f, &ne)
		roots = append(roots, ne.Err)
	}
	assert.Equal(t, []string{kdumpsyms.FinderModules, kdumpsyms.FinderFtrace, kdumpsyms.FinderBPF, kdumpsyms.FinderKprobes}, names)
	for _, r := range roots {
		assert.Same(t, roots[0], r)
	}
}

// TestIssue28SymbolFileOneShift: a System.map whose every address is off
// by one constant from the dump's (the same build at another KASLR
// offset, as on i386, which writes no KERNELOFFSET) is refused with the
// shift named, so the user knows what disagrees.
func TestIssue28SymbolFileOneShift(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths := g.RequireOneDump(t)
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, paths...)
	require.NoError(t, err)
	slide, ok := s.KASLROffset()
	s.Close()
	require.True(t, ok)
	var b strings.Builder
	for _, e := range g.Kallsyms(t) {
		if e.Module == "" && e.Type != 'a' && e.Type != 'A' {
			fmt.Fprintf(&b, "%016x %c %s\n", e.Addr-slide-0x200000, e.Type, e.Name)
		}
	}
	file := filepath.Join(t.TempDir(), "System.map")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
	s, err = kdumpsyms.Open(kdumpsyms.Options{SystemMap: file}, paths...)
	require.NoError(t, err)
	defer s.Close()
	fi, ok := s.Chain().Finder(kdumpsyms.FinderSystemMap)
	require.True(t, ok)
	err = fi.Find(symfinder.Query{Kind: symfinder.ByName, Name: "vfs_write"}, func(symfinder.Symbol) bool { return true })
	var fe *kdumpsyms.FileMismatchError
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.OneShift)
	assert.Equal(t, uint64(0x200000), fe.Shift)
	assert.Contains(t, err.Error(), "every one by 0x200000")
}

// TestOpenDecodesNothing: opening a dump decodes no symbols, even where
// finding the KASLR offset takes kallsyms (riscv64 6.12 writes no
// KERNELOFFSET); the offset is found, once, when asked for.
func TestOpenDecodesNothing(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-riscv64")
	paths := g.RequireOneDump(t)
	s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, paths...)
	require.NoError(t, err)
	defer s.Close()
	assert.Zero(t, phases(s, "kallsyms"), "Open decoded kallsyms")
	off, ok := s.KASLROffset()
	assert.True(t, ok)
	assert.Zero(t, off)
	_, _ = s.KASLROffset()
	assert.Equal(t, 1, phases(s, "kallsyms"))
}
