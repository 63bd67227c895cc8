package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// imagesWithoutNote converts the QEMU ELF dump at src into the images in
// which (of LiME, AVML and raw) with the VMCOREINFO note zeroed: the
// images of a kernel without CONFIG_CRASH_CORE. It checks that Open then
// finds no note in the LiME image, or the AVML one without it.
func imagesWithoutNote(t *testing.T, src string, which testutil.ImageFormat) testutil.Images {
	t.Helper()
	d, err := vmcore.OpenWith(vmcore.Options{ForceScan: true}, src)
	require.NoError(t, err)
	at, ok := d.FindVMCOREINFONote(0)
	n := uint64(len(d.VMCOREINFO()))
	d.Close()
	require.True(t, ok, "no VMCOREINFO note in %s", src)
	// Header, name with its pad, text.
	im, err := testutil.ConvertImagesOnly(src, t.TempDir(), []testutil.PhysRange{{Start: at, Last: at + 24 + n - 1}}, which)
	require.NoError(t, err)
	img := im.LiME
	if img == "" {
		img = im.AVML
	}
	require.NotEmpty(t, img, "neither a LiME nor an AVML image")
	d, err = vmcore.Open(img)
	require.NoError(t, err)
	defer d.Close()
	_, ok = d.FindVMCOREINFONote(0)
	require.False(t, ok, "the note is still in the image")
	return im
}

// imageArgs returns the command-line arguments naming the images (LiME,
// AVML, raw): with testutil.Thorough all three, else only the one at
// index i. What is derived from memory does not depend on the container,
// whose reading TestImagesCorpus checks on each.
func imageArgs(im testutil.Images, i int) [][]string {
	all := [][]string{{im.LiME}, {im.AVML}, {"--raw", im.RawLayout, im.Raw}}
	if testutil.Thorough() {
		return all
	}
	return all[i : i+1]
}

// imageFormats are the images imageArgs(im, i) names: the ones to convert.
func imageFormats(i int) testutil.ImageFormat {
	if testutil.Thorough() {
		return testutil.AllImages
	}
	return []testutil.ImageFormat{testutil.LiMEImage, testutil.AVMLImage, testutil.RawImage}[i]
}

// truthInfo is the guest's /sys/kernel/vmcoreinfo note text.
func truthInfo(t *testing.T, g *testutil.CorpusGuest) *vmcoreinfo.Info {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(g.Dir, "vmcoreinfo"))
	require.NoError(t, err)
	in, err := vmcoreinfo.Parse(b)
	require.NoError(t, err)
	return in
}

// TestImagesNoVMCOREINFO: an x86_64 image without the note (the committed
// extract, which holds the banner and page-table pages but not all the
// pages a table scan reads) gets VMCOREINFO derived from memory, with the
// values the kernel's own note has, and `info` says how. On the LiME image
// (all three with testutil.Thorough; see imageArgs).
func TestImagesNoVMCOREINFO(t *testing.T) {
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	src, ok := g.ExtractPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no committed QEMU ELF extract of " + g.Name)
	}
	im := imagesWithoutNote(t, src[0], imageFormats(0))
	want := truthInfo(t, g)
	for _, args := range imageArgs(im, 0) {
		code, stdout, stderr := runCLI(append([]string{"vmcoreinfo"}, args...)...)
		require.Equal(t, exitOK, code, stderr)
		got, err := vmcoreinfo.Parse([]byte(stdout))
		require.NoError(t, err, stdout)
		assert.Equal(t, want.OSRelease(), got.OSRelease())
		for _, k := range []string{"init_top_pgt"} {
			w, _ := want.Symbol(k)
			v, ok := got.Symbol(k)
			assert.True(t, ok && v == w, "SYMBOL(%s) %#x, want %#x", k, v, w)
		}
		w, _ := want.Number("phys_base")
		v, _ := got.Number("phys_base")
		assert.Equal(t, w, v, "phys_base")
		w, _ = want.KernelOffset()
		v, _ = got.KernelOffset()
		assert.Equal(t, w, v, "KERNELOFFSET")

		code, stdout, stderr = runCLI(append([]string{"info", "--no-symbols"}, args...)...)
		require.Equal(t, exitOK, code, stderr)
		assert.Regexp(t, `(?m)^vmcoreinfo: +derived from the image \(x86_64: release "6\.12\.`, stdout)
		assert.Regexp(t, `(?m)^architecture: +x86_64 `, stdout)
	}
}

// TestImagesNoVMCOREINFOFullDump: from the full dumps (with the cache;
// skipped without), the images without the note give `kdump-syms all`
// byte for byte equal to /proc/kallsyms: kallsyms by the table scan,
// anchored at the derived _text, and the modules through the derived
// page tables. The 6.1 and 5.10 guests too without -short.
func TestImagesNoVMCOREINFOFullDump(t *testing.T) {
	names := []string{"deb13-6.12-amd64"}
	if !testing.Short() {
		names = append(names, "deb12-6.1-amd64", "deb11-5.10-amd64")
	}
	for _, name := range names {
		g := testutil.CorpusGuestNamed(t, name)
		t.Run(name, func(t *testing.T) { allWithoutNote(t, g) })
	}
}

// allWithoutNote checks `kdump-syms all` on g's full QEMU ELF dump made
// into LiME, AVML and raw images without the VMCOREINFO note is
// /proc/kallsyms byte for byte, and returns the images.
func allWithoutNote(t *testing.T, g *testutil.CorpusGuest) testutil.Images {
	t.Helper()
	src := g.RequireFullDump(t, testutil.DumpQEMUELF)
	im := imagesWithoutNote(t, src[0], testutil.AllImages)
	want := g.KallsymsText(t)
	for _, args := range [][]string{{im.LiME}, {im.AVML}, {"--raw", im.RawLayout, im.Raw}} {
		code, stderr, diff := runCLIMatch(want, nil, append([]string{"all"}, args...)...)
		require.Equal(t, exitOK, code, stderr)
		assert.Empty(t, diff, "%v: all differs from /proc/kallsyms", args)
	}
	return im
}

// checkArm64Derived checks the VMCOREINFO derived from an arm64 image
// without the note (args, a `vmcoreinfo` command line) against the
// guest's own note, and that `info` says how. withStart: the image start
// (_text on 6.12, whose image head stays mapped; _stext on 6.1) and
// KERNELOFFSET too; the committed extract lacks the page tables below
// the banner that finding the start walks.
func checkArm64Derived(t *testing.T, g *testutil.CorpusGuest, args []string, withStart bool) {
	t.Helper()
	want := truthInfo(t, g)
	code, stdout, stderr := runCLI(append([]string{"vmcoreinfo"}, args...)...)
	require.Equal(t, exitOK, code, stderr)
	got, err := vmcoreinfo.Parse([]byte(stdout))
	require.NoError(t, err, stdout)
	assert.Equal(t, "arm64", got.Arch())
	assert.Equal(t, want.OSRelease(), got.OSRelease())
	w, _ := want.Symbol("swapper_pg_dir")
	v, ok := got.Symbol("swapper_pg_dir")
	assert.True(t, ok && v == w, "SYMBOL(swapper_pg_dir) %#x, want %#x", v, w)
	for _, k := range []string{"VA_BITS", "kimage_voffset", "PHYS_OFFSET", "TCR_EL1_T1SZ"} {
		w, _ := want.Number(k)
		v, ok := got.Number(k)
		assert.True(t, ok && v == w, "NUMBER(%s) %#x, want %#x", k, v, w)
	}
	if withStart {
		stext, _ := want.Symbol("_stext")
		ko, _ := want.KernelOffset()
		text := stext &^ (2<<20 - 1)
		if v, ok := got.Symbol("_text"); ok {
			assert.Equal(t, text, v, "SYMBOL(_text)")
		} else {
			v, ok := got.Symbol("_stext")
			assert.True(t, ok && v == stext, "SYMBOL(_stext) %#x, want %#x", v, stext)
		}
		v, _ := got.KernelOffset()
		assert.Equal(t, ko, v, "KERNELOFFSET")
	}
	code, stdout, stderr = runCLI(append([]string{"info", "--no-symbols"}, args...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^vmcoreinfo: +derived from the image \(arm64: release "`+regexp.QuoteMeta(want.OSRelease())+`"`, stdout)
	assert.Regexp(t, `(?m)^architecture: +arm64 `, stdout)
}

// TestImagesNoVMCOREINFOArm64: an arm64 image without the note (the
// committed 6.12 extract: 52-bit VAs with LPA2, five levels) gets
// VMCOREINFO derived from memory, with the values the kernel's own note
// has, and `info` says how. The 6.1 extract lacks the linear map's tables
// (nothing read them with the note), so it is covered by the full dump.
// On the AVML image (all three with testutil.Thorough; see imageArgs).
func TestImagesNoVMCOREINFOArm64(t *testing.T) {
	testutil.SkipShort(t, "an arm64 guest, which -short leaves out; vmcore's TestDeriveARM64 tests derive arm64 VMCOREINFO from synthetic page tables, TestImagesNoVMCOREINFO x86_64's from the short guest")
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-arm64")
	src, ok := g.ExtractPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no committed QEMU ELF extract of " + g.Name)
	}
	im := imagesWithoutNote(t, src[0], imageFormats(1))
	for _, args := range imageArgs(im, 1) {
		checkArm64Derived(t, g, args, false)
	}
}

// TestImagesNoVMCOREINFOArm64FullDump: as TestImagesNoVMCOREINFOFullDump
// for the arm64 guests (with the cache; skipped without): `kdump-syms all`
// on the images without the note is byte for byte /proc/kallsyms. The
// 6.1 guest too without -short.
func TestImagesNoVMCOREINFOArm64FullDump(t *testing.T) {
	names := []string{"deb13-6.12-arm64"}
	if !testing.Short() {
		names = append(names, "deb12-6.1-arm64")
	}
	for _, name := range names {
		g := testutil.CorpusGuestNamed(t, name)
		t.Run(name, func(t *testing.T) {
			im := allWithoutNote(t, g)
			checkArm64Derived(t, g, []string{im.LiME}, true)
		})
	}
}
