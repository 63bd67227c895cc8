package diskdump

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/require"
)

// corpusSets lists the kdump-compressed files of every corpus guest
// (testdata/vmcores, generated into its .cache or $KDUMP_SYMS_CORPUS and
// not committed): plain files one set each, split parts ("*-split.N")
// grouped. Guests whose dumps are absent are left out; with none the test
// skips.
func corpusSets(t *testing.T) map[string]map[string][]*testutil.ManifestFile {
	out := map[string]map[string][]*testutil.ManifestFile{}
	dirs := map[string]string{}
	noNote = map[string]bool{}
	for _, g := range testutil.Corpus(t) {
		noNote[g.Name] = g.Manifest.VMCOREINFONote != nil && !*g.Manifest.VMCOREINFONote
		sets := map[string][]*testutil.ManifestFile{}
		for _, f := range g.Manifest.Files {
			if f.Info.Format != "kdump" {
				continue
			}
			if _, err := os.Stat(filepath.Join(g.CacheDir, f.Name)); err != nil {
				continue
			}
			name := f.Name
			if i := strings.Index(name, "-split."); i >= 0 {
				name = name[:i+len("-split")]
			}
			sets[name] = append(sets[name], f)
		}
		if len(sets) > 0 {
			out[g.Name] = sets
			dirs[g.Name] = g.CacheDir
		}
	}
	if len(out) == 0 {
		t.Skip("no real dumps in the corpus cache (run testdata/vmcores/generate)")
	}
	corpusDirs = dirs
	return out
}

var corpusDirs map[string]string

// noNote names the guests whose dumps carry no VMCOREINFO (s390x, armhf:
// no fw_cfg to tell QEMU where it is).
var noNote map[string]bool

// TestCorpus opens every real kdump-compressed file and reads every saved
// page; dumps of one guest made by makedumpfile with the same dump level
// must hold the same pages with the same bytes whatever the codec, layout
// (flattened) or split.
func TestCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("reads hundreds of MiB")
	}
	for guest, sets := range corpusSets(t) {
		t.Run(guest, func(t *testing.T) {
			var refName string
			var ref map[uint64][]byte // a sample of pages from the first mdf-d31 dump
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range sets {
					if !yield(k) {
						return
					}
				}
			})
			for _, name := range names {
				files := sets[name]
				t.Run(name, func(t *testing.T) {
					var paths []string
					want := map[string]int{}
					var pages uint64
					for _, f := range files {
						paths = append(paths, filepath.Join(corpusDirs[guest], f.Name))
						for k, v := range f.Info.Codecs {
							if v != 0 && k != "shared_descs" {
								want[k] += v
							}
						}
						pages += f.Info.Pages
					}
					d, err := Open(paths...)
					require.NoError(t, err)
					defer d.Close()
					h := d.Header()
					if (strings.HasSuffix(guest, "-arm64") || strings.HasSuffix(guest, "-ppc64el")) && strings.HasPrefix(name, "qemu.") {
						// QEMU numbers arm64 and pseries dumps in 64 KiB
						// pages, whatever the guest's.
						require.Equal(t, 65536, h.BlockSize)
					} else {
						require.Equal(t, 4096, h.BlockSize)
					}
					switch {
					case strings.HasPrefix(name, "qemu.") && h.Machine == "Unknown":
						// QEMU 10, and 7.2 on arm64 and ppc64, write
						// "Unknown" when they have no guest utsname.
						t.Logf("utsname.machine %q", h.Machine)
					case strings.HasSuffix(guest, "-amd64"):
						require.Equal(t, "x86_64", h.Machine)
					default:
						require.NotEmpty(t, h.Machine)
						t.Logf("utsname.machine %q", h.Machine)
					}
					if noNote[guest] {
						// No note in QEMU's dumps of these (no fw_cfg, or
						// no driver for it): VMCOREINFO is found in memory.
						require.Nil(t, d.VMCOREINFO())
					} else {
						require.Contains(t, string(d.VMCOREINFO()), "OSRELEASE=")
					}
					comp := d.Compressions()
					t.Logf("v%d status %#x flattened=%v split=%v parts=%d maxmapnr=%#x codecs=%v",
						h.Version, h.Status, h.Flattened, h.Split, len(h.Parts), h.MaxMapnr, comp)
					switch {
					case strings.Contains(name, "zlib"):
						require.NotZero(t, comp["zlib"])
					case strings.Contains(name, "lzo"):
						require.NotZero(t, comp["lzo"])
					case strings.Contains(name, "zstd"):
						require.NotZero(t, comp["zstd"])
					case strings.Contains(name, "snappy"):
						require.NotZero(t, comp["snappy"])
					}
					require.Zero(t, comp["lost"]+comp["unknown"]+comp["unreadable"])
					// The corpus tool's own reader counted the same.
					require.Equal(t, want, comp)
					total := uint64(0)
					for _, p := range h.Parts {
						total += p.Pages
					}
					require.Equal(t, pages, total)
					buf := make([]byte, h.BlockSize)
					n := 0
					sample := map[uint64][]byte{}
					for pfn := range d.SavedPFNs() {
						_, err := d.ReadAt(buf, pfn*uint64(h.BlockSize))
						require.NoError(t, err, "pfn %#x", pfn)
						if n%97 == 0 {
							sample[pfn] = bytes.Clone(buf)
						}
						n++
					}
					require.NotZero(t, n)
					if !strings.HasPrefix(name, "mdf-d31") && !strings.HasPrefix(name, "xform-d31") {
						return
					}
					if ref == nil {
						ref, refName = sample, name
						return
					}
					for pfn, want := range ref {
						_, err := d.ReadAt(buf, pfn*uint64(h.BlockSize))
						require.NoError(t, err, "pfn %#x (saved in %s)", pfn, refName)
						require.Equal(t, want, buf, "pfn %#x differs from %s", pfn, refName)
					}
				})
			}
		})
	}
}
