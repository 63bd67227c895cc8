package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// TestImagesCorpus converts each guest's committed QEMU ELF extract into a
// LiME file, an AVML image and a raw image (testutil.ConvertImages) and
// checks that `kdump-syms all` prints the guest's /proc/kallsyms byte for
// byte from each, finding VMCOREINFO by the memory scan, and that `info`
// names the format. i386 needs --arch: nothing in its VMCOREINFO names it.
//
// Run on x86_64 and arm64, and on the two whose architecture the image
// formats make hard: i386 (named by --arch) and big-endian s390x. (Every
// guest passes, with testutil.Thorough.)
func TestImagesCorpus(t *testing.T) {
	t.Parallel()
	guests := testutil.Sample(t, "deb11-5.10-i386", "deb13-6.12-amd64", "deb13-6.12-arm64", "deb13-6.12-s390x")
	for _, g := range guests {
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			src, ok := g.ExtractPaths(testutil.DumpQEMUELF)
			if !ok {
				t.Skipf("no committed QEMU ELF extract of %s", g.Name)
			}
			im := sharedImages(t, src[0])
			want := g.KallsymsText(t)
			var extra []string
			if g.Arch() == "i386" {
				extra = []string{"--arch", "i386"}
			}
			for _, c := range []struct {
				format string
				args   []string
			}{
				{"lime", []string{im.LiME}},
				{"avml", []string{im.AVML}},
				{"raw", []string{"--raw", im.RawLayout, im.Raw}},
			} {
				t.Run(c.format, func(t *testing.T) {
					args := append(append([]string{"all"}, extra...), c.args...)
					code, stderr, diff := runCLIMatch(want, nil, args...)
					require.Equal(t, exitOK, code, stderr)
					if diff != "" {
						t.Fatalf("not /proc/kallsyms: %s", diff)
					}
					args[0] = "info"
					code, stdout, stderr := runCLI(append(args, "--no-symbols")...)
					require.Equal(t, exitOK, code, stderr)
					assert.Regexp(t, `(?m)^format: +`+c.format+`$`, stdout)
					assert.Regexp(t, `(?m)^vmcoreinfo: +memory-scan at 0x`, stdout)
				})
			}
		})
	}
}

// TestImagesBadInput: a memory image the file cannot hold fails with a
// message naming the range; a malformed --raw is a usage error.
func TestImagesBadInput(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.raw")
	require.NoError(t, os.WriteFile(small, make([]byte, 0x2000), 0o644))
	code, _, stderr := runCLI("all", "--raw", "0:0x1000,0x100000:1M", small)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "range 1 [0x100000-0x1fffff]: raw image too short: the range needs file bytes up to 0x101000, the file has 0x2000")

	code, _, stderr = runCLI("all", "--raw", "0x", small)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `invalid value "0x" for flag -raw`)

	lime := filepath.Join(dir, "bad.lime")
	img := append(testutil.LiMEHeader(binary.LittleEndian, 0x4C694D45, 1, 0x1000, 0x2fff), make([]byte, 0x1000)...)
	require.NoError(t, os.WriteFile(lime, img, 0o644))
	code, _, stderr = runCLI("all", lime)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "range 0 [0x1000-0x2fff]: range needs 8192 bytes of data, the file has 4096 left")
}

// TestImagesExtract: `kdump-syms extract` of a memory image writes an ELF
// core of the pages read, with the architecture and VMCOREINFO as a note,
// from which `all` prints /proc/kallsyms.
func TestImagesExtract(t *testing.T) {
	testutil.SkipShort(t, "extract's TestCorpusExtract checks the writer, TestImagesCorpus the raw image reader")
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	src, ok := g.ExtractPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no committed QEMU ELF extract of " + g.Name)
	}
	im := sharedImages(t, src[0])
	out := filepath.Join(t.TempDir(), "small.elf")
	code, _, stderr := runCLI("extract", "-o", out, "--raw", im.RawLayout, im.Raw)
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr := runCLI("info", "--no-symbols", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^format: +elf$`, stdout)
	assert.Regexp(t, `(?m)^vmcoreinfo: +elf-note$`, stdout)
	code, stderr, diff := runCLIMatch(g.KallsymsText(t), nil, "all", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, diff, "all differs from /proc/kallsyms")
}

// fullImagesEnv, set to 1, makes TestImagesFullDump convert the full QEMU
// ELF dumps of the cache (256 MiB each, about 3 s and 800 MiB of disk per
// guest), which TestImagesCorpus's extracts cannot show: AVML leaves out
// all-zero 16 MiB blocks, which a full dump has.
const fullImagesEnv = "KDUMP_SYMS_FULL_IMAGES"

// TestImagesFullDump is TestImagesCorpus on the full dumps, with
// fullImagesEnv=1 and the cache present.
func TestImagesFullDump(t *testing.T) {
	if os.Getenv(fullImagesEnv) != "1" {
		t.Skipf("set %s=1 to convert the full corpus dumps (slow)", fullImagesEnv)
	}
	for _, name := range []string{"deb13-6.12-amd64", "deb13-6.12-arm64"} {
		g := testutil.CorpusGuestNamed(t, name)
		t.Run(name, func(t *testing.T) {
			src := g.RequireFullDump(t, testutil.DumpQEMUELF)
			im, err := testutil.ConvertImages(src[0], t.TempDir())
			require.NoError(t, err)
			want := g.KallsymsText(t)
			for _, args := range [][]string{{im.LiME}, {im.AVML}, {"--raw", im.RawLayout, im.Raw}} {
				code, stderr, diff := runCLIMatch(want, nil, append([]string{"all"}, args...)...)
				require.Equal(t, exitOK, code, stderr)
				assert.Empty(t, diff, "%v: all differs from /proc/kallsyms", args)
			}
		})
	}
}
