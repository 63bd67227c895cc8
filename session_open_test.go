package kdumpsyms_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionSources opens one dump three ways (a path, an io.ReaderAt
// holding it in memory, an open *vmcore.Dump) and gets the same answers,
// through the Chain's everyday calls; a finder added after the built-in
// ones gets the addresses they have no symbol for.
func TestSessionSources(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths, ok := g.DumpPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no qemu.elf dump")
	}
	var want testutil.KallsymsEntry
	for _, e := range g.Kallsyms(t) {
		if e.Name == "vfs_write" && e.Module == "" {
			want = e
		}
	}
	require.NotZero(t, want.Addr)

	raw, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	fromPath, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
	require.NoError(t, err)
	defer fromPath.Close()
	fromReader, err := kdumpsyms.OpenReaderAt(kdumpsyms.Options{}, bytes.NewReader(raw), int64(len(raw)))
	require.NoError(t, err)
	defer fromReader.Close()
	d, err := vmcore.Open(paths...)
	require.NoError(t, err)
	fromDump, err := kdumpsyms.FromDump(kdumpsyms.Options{}, d)
	require.NoError(t, err)
	defer fromDump.Close()

	for name, s := range map[string]*kdumpsyms.Session{"path": fromPath, "reader": fromReader, "dump": fromDump} {
		t.Run(name, func(t *testing.T) {
			syms, err := s.Chain().SymbolsNamed("vfs_write")
			require.NoError(t, err)
			require.Len(t, syms, 1)
			assert.Equal(t, want.Addr, syms[0].Addr)
			at, err := s.Chain().SymbolsAt(want.Addr + 0xe1)
			require.NoError(t, err)
			require.NotEmpty(t, at)
			assert.Equal(t, "vfs_write", at[0].Name)
			assert.Equal(t, "vfs_write+0xe1/0x440", at[0].Format(want.Addr+0xe1))
			_, err = s.Chain().SymbolsNamed("no_such_symbol")
			assert.ErrorIs(t, err, symfinder.ErrNotFound)
		})
	}

	// A user's finder after the built-in ones answers what they do not.
	mine := symfinder.FinderFunc{FinderName: "mine", Func: func(q symfinder.Query, yield func(symfinder.Symbol) bool) error {
		if q.Kind == symfinder.ByAddr && q.Addr>>40 == 0xffff88 {
			yield(symfinder.Symbol{Name: "direct_map_object", Addr: q.Addr &^ 0xfff, Size: 0x1000, Kind: 'd', Module: "mine"})
		}
		return nil
	}}
	require.NoError(t, fromPath.Chain().Add(mine))
	s, err := fromPath.Chain().Lookup(0xffff888003a8c010)
	require.NoError(t, err)
	assert.Equal(t, "direct_map_object+0x10/0x1000 [mine]", s.Format(0xffff888003a8c010))
	_, err = fromPath.Chain().Lookup(0x1000)
	assert.ErrorIs(t, err, symfinder.ErrNotFound, "a per-CPU offset is no address the kernel resolves")
}
