package extract

import (
	"path/filepath"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/corrupttest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExtractFailsOnCorruptSources: a failure caused by corrupt data fails
// the extract for BTF (and so the module walk) and for the module list,
// as it does for kallsyms: an extract must not quietly drop what a reader
// of the full dump would report.
func TestExtractFailsOnCorruptSources(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	src := g.RequireDump(t, testutil.DumpQEMUELF)[0]
	for _, tc := range []struct {
		name, sym string
		n         int
	}{
		{"btf header", "__start_BTF", 24},
		{"module list", "modules", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := corrupttest.Copy(t, src, corrupttest.Symbol(t, src, tc.sym), tc.n)
			out := filepath.Join(t.TempDir(), "x.elf")
			_, err := Extract(out, []string{broken}, Options{})
			require.Error(t, err)
			assert.ErrorIs(t, err, memory.ErrCorrupt)
			assert.NoFileExists(t, out)
		})
	}
}
