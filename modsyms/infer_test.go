package modsyms

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// TestCorpusInferred infers the struct layouts of corpus guests with BTF
// from the dump alone, checks each inferred offset against the BTF, and
// checks that the walk with inferred layouts gives exactly what it gives
// with BTF. TestCorpus walks every guest with BTF layouts; inference is
// another layout source, so by default it runs on guests chosen for what
// it depends on: struct module before 6.4 (5.10, 6.1) and after
// (6.12's module_memory; 7.2's, with is_rox before size, and its flagstab
// before num_syms), byte order (s390x is big-endian) and a second 64-bit
// architecture (arm64). (No guest with BTF has 32-bit pointers.)
func TestCorpusInferred(t *testing.T) {
	ran := false
	for _, g := range testutil.Sample(t, "deb11-5.10-amd64", "deb12-6.1-amd64", "deb13-6.12-amd64", "deb13-6.12-arm64", "deb13-6.12-s390x", "deb14-7.2-amd64") {
		if !g.ExpectModules() {
			continue
		}
		dumps := g.AvailableDumps()
		if len(dumps) == 0 {
			continue
		}
		ran = true
		t.Run(g.Name, func(t *testing.T) {
			syms := truthSymbols(g.Kallsyms(t))
			paths, _ := g.DumpPaths(dumps[0])
			d, err := vmcore.Open(paths...)
			require.NoError(t, err)
			defer d.Close()
			k, err := d.Kernel()
			require.NoError(t, err)
			start, _ := syms("__start_BTF")
			stop, _ := syms("__stop_BTF")
			b, err := btflayout.FromMemory(k, start, stop)
			require.NoError(t, err)
			head, ok := syms("modules")
			require.True(t, ok)
			arch := d.Arch()
			inf, err := btflayout.Infer(k, btflayout.InferConfig{Target: arch.Target, Release: d.Info().OSRelease(), Head: head})
			require.NoError(t, err)
			for _, e := range inf.Evidence() {
				t.Log(e)
			}
			for name, fields := range inf.Want().Structs {
				got, err := inf.Struct(name)
				require.NoError(t, err)
				want, err := b.Struct(name, fields...)
				require.NoError(t, err, name)
				if got.Size != 0 {
					assert.Equal(t, want.Size, got.Size, "sizeof(%s)", name)
				}
				for _, f := range got.Fields() {
					w, _ := want.Field(f.Name)
					assert.Equal(t, w.Offset, f.Offset, "%s.%s offset", name, f.Name)
					assert.Equal(t, w.Size, f.Size, "%s.%s size", name, f.Name)
					assert.Equal(t, w.Count, f.Count, "%s.%s count", name, f.Name)
				}
			}
			viaBTF, err := Load(k, syms, Options{Layout: b, Target: arch.Target})
			require.NoError(t, err)
			viaInf, err := Load(k, syms, Options{Layout: inf, Target: arch.Target})
			require.NoError(t, err)
			if b, i := moduleText(t, viaBTF), moduleText(t, viaInf); b != i {
				t.Errorf("inferred layouts give other lines: %s", firstDiff(b, i))
			}
			require.Len(t, viaInf.Modules(), len(viaBTF.Modules()))
			for i, m := range viaInf.Modules() {
				w := viaBTF.Modules()[i]
				assert.Equal(t, w.Name, m.Name)
				assert.Equal(t, w.Size, m.Size, m.Name)
				assert.Equal(t, w.TextBase, m.TextBase, m.Name)
				assert.Equal(t, w.State, m.State, m.Name)
				assert.Equal(t, w.Regions, m.Regions, m.Name)
			}
		})
	}
	if !ran {
		t.Skip("no corpus dump of a guest with BTF")
	}
}
