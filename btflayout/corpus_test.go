package btflayout_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// TestCorpusModuleScan finds the module list head of every corpus dump
// both ways the scan can go: through vmap_area_list where VMCOREINFO has
// it, and through the page tables (as on v6.9+) everywhere. Where kallsyms
// has the modules symbol, the head must be it; elsewhere both ways must
// agree. It reads each guest's one dump (every format with
// KDUMP_SYMS_THOROUGH=1): the scans walk kernel memory the same whatever
// the container.
func TestCorpusModuleScan(t *testing.T) {
	ran := false
	for _, g := range testutil.Corpus(t) {
		for _, f := range g.SampleDumps() {
			t.Run(g.Name+"/"+string(f), func(t *testing.T) {
				paths, _ := g.DumpPaths(f)
				d, err := vmcore.Open(paths...)
				require.NoError(t, err)
				defer d.Close()
				k, err := d.Kernel()
				require.NoError(t, err)
				// Lazily: a few names are looked up.
				res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{Lazy: true})
				require.NoError(t, err)
				syms := modsyms.FromFinder(res.Finder())
				stext, _ := syms("_stext")
				arch := d.Arch()
				in := d.Info()
				base := btflayout.ModuleScanConfig{InferConfig: btflayout.InferConfig{Target: arch.Target, Release: in.OSRelease()}}
				hi := stext + 2<<30
				if hi < stext { // riscv64: the image is in the top 2 GiB
					hi = ^uint64(0)
				}
				base.Ranges = [][2]uint64{{stext - 2<<30, hi}}
				if arch.PtrSize == 4 {
					base.Ranges = [][2]uint64{{0, 1 << 32}}
				}
				tr, err := d.Translator()
				require.NoError(t, err)
				// ppc64 (the start of vmalloc) and s390x (below the
				// image, or the top of the address space): where the
				// translation says their layouts place modules.
				base.Ranges = append(tr.Layout().Modules, base.Ranges...)
				if arch.Name == "ppc64le" || arch.Name == "s390x" {
					require.NotEmpty(t, tr.Layout().Modules)
				}
				pt := base
				pt.Mapped = tr.(vtop.Mapper).Mapped
				pt.DirectMap = tr.Layout().DirectMap
				if init, ok := syms("_sinittext"); ok {
					pt.Exclude = [][2]uint64{{stext, init}}
				}
				if arch.Name == "x86_64" {
					pt.Ranges = [][2]uint64{{0xffffffff80000000 + 1<<30, 0xffffffffff000000}}
				}
				var heads []uint64
				for _, cfg := range []btflayout.ModuleScanConfig{pt, vmapConfig(base, in)} {
					if len(heads) == 1 && cfg.VmapAreaList == 0 {
						break // no vmap_area_list in this kernel's VMCOREINFO
					}
					head, inf, err := btflayout.FindModuleList(k, cfg)
					if (errors.Is(err, memory.ErrNotSaved) || errors.Is(err, btflayout.ErrNotFound)) && g.IsExtract(f) {
						t.Skipf("the extract lacks pages the scan reads: %v", err)
					}
					require.NoError(t, err, "page tables: %v", cfg.Mapped != nil)
					require.NotNil(t, inf)
					heads = append(heads, head)
				}
				ran = true
				if want, ok := syms("modules"); ok {
					for _, h := range heads {
						assert.Equal(t, want, h)
					}
				}
				for _, h := range heads[1:] {
					assert.Equal(t, heads[0], h)
				}
			})
		}
	}
	if !ran {
		t.Skip("no corpus dump")
	}
}

func vmapConfig(cfg btflayout.ModuleScanConfig, in interface {
	Symbol(string) (uint64, bool)
	Offset(string, string) (uint64, bool)
}) btflayout.ModuleScanConfig {
	cfg.VmapAreaList, _ = in.Symbol("vmap_area_list")
	cfg.VAStart, _ = in.Offset("vmap_area", "va_start")
	cfg.VAList, _ = in.Offset("vmap_area", "list")
	return cfg
}
