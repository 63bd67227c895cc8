package vmcore

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// wantFormat is what Format should say for a corpus dump, from its name
// (testutil.DumpFormat documents the producers).
func wantFormat(f testutil.DumpFormat) string {
	n := string(f)
	switch {
	case strings.HasSuffix(n, ".elf"):
		return "elf"
	case strings.HasSuffix(n, "-split"):
		return "kdump-split"
	case n == "qemu.kdump-raw-zlib":
		return "kdump" // QEMU 10's kdump-raw-zlib is not flattened
	case strings.HasSuffix(n, ".flat"), strings.HasPrefix(n, "qemu.kdump"):
		return "kdump-flattened" // QEMU's kdump-zlib is flattened
	}
	return "kdump"
}

// corpusDumps yields the guests with at least one cached dump, skipping
// the test when there are none.
func corpusDumps(t *testing.T) []*testutil.CorpusGuest {
	t.Helper()
	var out []*testutil.CorpusGuest
	for _, g := range testutil.Corpus(t) {
		if len(g.Dumps()) > 0 {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		t.Skipf("no corpus dumps in %s: run testdata/vmcores/generate (needs root, qemu, network to Debian's archive)", testutil.CorpusCacheDir(t))
	}
	return out
}

// TestCorpusOpen opens every cached dump of every guest and checks its
// VMCOREINFO against the guest's captured text and uname -r.
func TestCorpusOpen(t *testing.T) {
	for _, g := range corpusDumps(t) {
		t.Run(g.Name, func(t *testing.T) {
			truth := g.VMCOREINFO(t)
			release := g.Uname(t)
			for _, cd := range g.Dumps() {
				f := cd.Format
				t.Run(string(f), func(t *testing.T) {
					d, err := Open(cd.Paths...)
					require.NoError(t, err)
					defer d.Close()
					assert.Equal(t, wantFormat(f), d.Format())
					assert.Equal(t, string(bytes.TrimRight(truth, "\x00")), string(bytes.TrimRight(d.VMCOREINFO(), "\x00")))
					require.NotNil(t, d.Info(), "InfoErr: %v", d.InfoErr())
					assert.Equal(t, release, d.Info().OSRelease())
					assert.NotEmpty(t, d.InfoSource())
					assert.Equal(t, g.ArchName(), d.Arch().Name)
					assert.Equal(t, g.PtrSize(), d.Arch().PtrSize)
					// The kernel's own PAGESIZE: 64 KiB on bookworm's ppc64el.
					assert.Equal(t, truthPageSize(t, truth), d.PageSize())
					if strings.HasPrefix(string(f), "qemu") {
						assert.NotEmpty(t, d.CPUs(), "QEMU writes one NT_PRSTATUS per CPU")
					}
					k, err := d.Kernel()
					require.NoError(t, err)
					stext, ok := d.Info().Symbol("_stext")
					require.True(t, ok)
					var b [16]byte
					err = memory.ReadFull(k, b[:], stext)
					if cd.Extract && errors.Is(err, memory.ErrNotSaved) {
						return // an extract holds only what symbol decoding reads
					}
					require.NoError(t, err, "reading _stext")
				})
			}
		})
	}
}

// TestCorpusScan forces the memory scan and checks that it finds the note
// where the guest's /sys/kernel/vmcoreinfo said it was.
func TestCorpusScan(t *testing.T) {
	for _, g := range corpusDumps(t) {
		t.Run(g.Name, func(t *testing.T) {
			addr, _ := g.VMCOREINFOSys(t)
			truth := bytes.TrimRight(g.VMCOREINFO(t), "\x00")
			for _, cd := range g.Dumps() {
				t.Run(string(cd.Format), func(t *testing.T) {
					d, err := OpenWith(Options{ForceScan: true}, cd.Paths...)
					require.NoError(t, err)
					defer d.Close()
					how := "memory-scan"
					if g.Arch() == "s390x" { // the lowcore's pointer comes first
						how = "s390-lowcore"
					}
					assert.Equal(t, fmt.Sprintf("%s at %#x", how, addr), d.InfoSource())
					assert.Equal(t, string(truth), string(bytes.TrimRight(d.VMCOREINFO(), "\x00")))
				})
			}
		})
	}
}

// TestCorpusSamePages compares physical pages across the formats of one
// guest against qemu-fixed.elf, which holds every page: makedumpfile's
// outputs were written from it and must match it byte for byte on every
// page they saved (for makedumpfile -E, the file-backed parts of its
// segments, not the zero-filled excluded tails). QEMU's own kdump dumps
// were taken after its ELF dump, from a guest that still runs its panic
// loop (timer ticks, the spinning CPU's stack): a handful of pages may
// legitimately change between the two, so those formats may differ in at
// most maxLiveChanges sampled pages, and the differences are logged.
func TestCorpusSamePages(t *testing.T) {
	const samples = 3000
	const maxLiveChanges = 3
	for _, g := range corpusDumps(t) {
		t.Run(g.Name, func(t *testing.T) {
			var refPaths []string
			for _, cd := range g.Dumps() {
				if cd.Format == testutil.DumpQEMUELFFixed || cd.Format == testutil.DumpQEMUELF && refPaths == nil {
					refPaths = cd.Paths
				}
			}
			if refPaths == nil {
				refPaths = g.RequireDump(t, testutil.DumpQEMUELF) // skips, saying why
			}
			ref, err := Open(refPaths...)
			require.NoError(t, err)
			defer ref.Close()
			for _, cd := range g.Dumps() {
				f := cd.Format
				t.Run(string(f), func(t *testing.T) {
					d, err := Open(cd.Paths...)
					require.NoError(t, err)
					defer d.Close()
					ps := uint64(d.PageSize())
					var pages []uint64
					d.be.ranges(func(start, last uint64) bool {
						for a := start; a <= last && a >= start; a += ps {
							pages = append(pages, a)
						}
						return true
					})
					require.NotEmpty(t, pages)
					step := max(1, len(pages)/samples)
					want := make([]byte, ps)
					got := make([]byte, ps)
					var compared, differ int
					for i := 0; i < len(pages); i += step {
						a := pages[i]
						if err := memory.ReadFull(d.Physical(), got, a); err != nil { // a plain if, per page
							t.Fatalf("page %#x: %v", a, err)
						}
						if err := memory.ReadFull(ref.Physical(), want, a); err != nil {
							if cd.Extract && errors.Is(err, memory.ErrNotSaved) {
								// Extracts keep whole blocks of their dump: QEMU's
								// arm64 kdump has 64 KiB ones, the ELF 4 KiB pages.
								continue
							}
							t.Errorf("page %#x saved in %s but not in the reference: %v", a, f, err)
							continue
						}
						compared++
						if !bytes.Equal(want, got) {
							differ++
							if differ <= 5 {
								t.Logf("page %#x differs from the reference", a)
							}
						}
					}
					t.Logf("%d pages saved, %d compared, %d differ", len(pages), compared, differ)
					if differ > 0 && strings.HasPrefix(string(f), "qemu.kdump") && differ <= maxLiveChanges {
						t.Logf("taken separately from the reference: %d changed pages tolerated", differ)
					} else if differ > 0 {
						t.Errorf("%d of %d compared pages differ from the reference", differ, compared)
					}
				})
			}
		})
	}
}

// truthPageSize returns the PAGESIZE line of a guest's VMCOREINFO text.
func truthPageSize(t *testing.T, truth []byte) int {
	for _, line := range strings.Split(string(truth), "\n") {
		if v, ok := strings.CutPrefix(line, "PAGESIZE="); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no PAGESIZE in the guest's VMCOREINFO")
	return 0
}
