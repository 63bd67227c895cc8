package extract

import (
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// allSymbols is what "kdump-syms all" prints, one line per symbol, and the
// errors of the finders.
func allSymbols(t *testing.T, paths []string) ([]string, error) {
	t.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []string
	for sym, err := range s.Chain().All() {
		if err != nil {
			// A page absent from the input may be absent from the extract
			// in another way (excluded, or not written): the same finder
			// failing for want of a page is the same outcome.
			var fe *symfinder.FinderError
			if errors.Is(err, memory.ErrNotSaved) && errors.As(err, &fe) {
				out = append(out, "error: "+fe.Finder+": a page not in the dump")
				continue
			}
			out = append(out, "error: "+err.Error())
			continue
		}
		// Not fmt.Sprintf: a riscv64 guest has 1.3 million symbols.
		var b []byte
		b = strconv.AppendUint(b, sym.Addr, 16)
		b = append(append(append(b, ' ', byte(sym.Kind), ' '), sym.Name...), '\t')
		out = append(out, string(append(append(b, sym.Module...), '\n')))
	}
	return out, nil
}

// TestCorpusExtract extracts every corpus dump there is (the full dumps of
// the cache, else the committed extracts, which then extract to
// themselves) and checks that the extract decodes to exactly the same
// symbols as its input.
func TestCorpusExtract(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		t.Run(g.Name, func(t *testing.T) {
			formats := g.AvailableDumps()
			if len(formats) == 0 {
				t.Skipf("no dumps of %s: %s", g.Name, "run testdata/vmcores/generate")
			}
			// Every dump of a guest holds the same kernel memory and decodes
			// to the same symbols (the root package's TestSessionCorpus
			// checks each against /proc/kallsyms), so the input is decoded
			// once per guest and every format's extract compared with it.
			var want []string
			for _, f := range formats {
				t.Run(string(f), func(t *testing.T) {
					paths, _ := g.DumpPaths(f)
					if want == nil {
						var err error
						if want, err = allSymbols(t, paths); err != nil {
							t.Skipf("the input itself does not open: %v", err)
						}
					}
					require.Greater(t, len(want), 10000)
					variants := []string{""}
					if f == testutil.DumpZlib || f == testutil.DumpQEMUKdumpZlib {
						variants = append(variants, "elf")
					}
					for _, format := range variants {
						out := filepath.Join(t.TempDir(), "x")
						start := time.Now()
						res, err := Extract(out, paths, Options{Format: format})
						require.NoError(t, err)
						t.Logf("format %q: %d pages, %d bytes in %d file(s), %s", res.Format, res.Pages, res.Bytes, len(res.Files), time.Since(start))
						if format == "" {
							require.Len(t, res.Files, len(paths))
						}
						got, err := allSymbols(t, res.Files)
						require.NoError(t, err)
						require.Equal(t, len(want), len(got), "symbol count")
						for i := range want {
							if want[i] != got[i] {
								require.Equal(t, want[i], got[i], "symbol %d", i)
							}
						}
					}
				})
			}
		})
	}
}

// TestCommittedExtractsWrapped opens the committed extracts as they are,
// xz-wrapped, through vmcore, which decompresses them itself.
//
// Two guests are enough for the wrapped path (a 32-bit little-endian and
// a big-endian ELF core); every extract is opened decompressed by the
// other corpus tests.
func TestCommittedExtractsWrapped(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		if g.Name != "deb11-5.10-i386" && g.Name != "deb13-6.12-s390x" && !testing.Short() {
			continue
		}
		files, ok := g.ExtractFiles(testutil.DumpQEMUELF)
		if !ok {
			t.Fatalf("%s: no committed extract of %s", g.Name, testutil.DumpQEMUELF)
		}
		d, err := vmcore.Open(files...)
		require.NoError(t, err)
		require.Equal(t, "xz+elf", d.Format())
		require.Equal(t, g.Uname(t), d.Info().OSRelease())
		d.Close()
	}
}
