package vmcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memimage"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// imageMemory is two pages of RAM at 0x100000 with the VMCOREINFO note of
// text (in byte order bo) at 0x100ff0, across the page boundary.
func imageMemory(bo binary.ByteOrder, text string) (*testutil.SparseMemory, []testutil.PhysRange) {
	m := testutil.NewSparseMemory()
	m.Write(0x100000, make([]byte, 0x2000))
	m.Write(0x100ff0, noteBytes(bo, text))
	return m, []testutil.PhysRange{{Start: 0x100000, Last: 0x101fff}}
}

func TestOpenMemImages(t *testing.T) {
	le := binary.LittleEndian
	m, rs := imageMemory(le, infoX86)
	dir := t.TempDir()
	var lime, avml bytes.Buffer
	require.NoError(t, testutil.WriteLiME(&lime, m, rs, le))
	require.NoError(t, testutil.WriteAVML(&avml, m, rs))
	raw := filepath.Join(dir, "raw")
	fh, err := os.Create(raw)
	require.NoError(t, err)
	require.NoError(t, testutil.WriteRaw(fh, m, rs, 0x100000, 0x101fff))
	require.NoError(t, fh.Close())
	files := map[string]string{"lime": filepath.Join(dir, "lime"), "avml": filepath.Join(dir, "avml"), "raw": raw}
	require.NoError(t, os.WriteFile(files["lime"], lime.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(files["avml"], avml.Bytes(), 0o644))
	xzLime := filepath.Join(dir, "lime.xz")
	require.NoError(t, os.WriteFile(xzLime, compress(t, "xz", lime.Bytes()), 0o644))

	check := func(t *testing.T, d *Dump, format string) {
		t.Helper()
		assert.Equal(t, format, d.Format())
		assert.Equal(t, InfoOrigin{Kind: InfoMemoryScan, Addr: 0x100ff0}, d.InfoOrigin())
		assert.Equal(t, "x86_64", d.Arch().Name)
		assert.Equal(t, "vmcoreinfo", d.Arch().Source)
		assert.Nil(t, d.ELFCore())
		assert.Nil(t, d.Kdump())
		var b [4]byte
		_, err := d.Physical().ReadAt(b[:], 0xfffff)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
	}
	for format, p := range files {
		t.Run(format, func(t *testing.T) {
			opt := Options{TempDir: dir}
			if format == "raw" {
				opt.Raw = []memimage.RawRange{{Start: 0x100000}}
			}
			d, err := OpenWith(opt, p)
			require.NoError(t, err)
			defer d.Close()
			check(t, d, format)

			fh, err := os.Open(p)
			require.NoError(t, err)
			defer fh.Close()
			st, _ := fh.Stat()
			d2, err := OpenReaderAt(fh, st.Size(), opt)
			require.NoError(t, err)
			check(t, d2, format)
			d2.Close()
		})
	}
	t.Run("xz+lime", func(t *testing.T) {
		d, err := OpenWith(Options{TempDir: dir}, xzLime)
		require.NoError(t, err)
		defer d.Close()
		check(t, d, "xz+lime")
	})
	t.Run("raw short", func(t *testing.T) {
		_, err := OpenWith(Options{Raw: []memimage.RawRange{{Start: 0, Size: 0x3000}}}, raw)
		assert.ErrorIs(t, err, memory.ErrCorrupt)
		var fe *memimage.FormatError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, 0, fe.Range)
	})
	t.Run("raw of two files", func(t *testing.T) {
		_, err := OpenWith(Options{Raw: []memimage.RawRange{{}}}, raw, raw)
		assert.ErrorIs(t, err, ErrSingleFile)
		errshape.Require(t, err)
	})
}

// TestOptionsArch: an image of a kernel whose VMCOREINFO names no
// architecture (i386) needs Options.Arch; a contradiction is corrupt.
func TestOptionsArch(t *testing.T) {
	le := binary.LittleEndian
	m, rs := imageMemory(le, "OSRELEASE=5.10.0-32-686-pae\nPAGESIZE=4096\n")
	var lime bytes.Buffer
	require.NoError(t, testutil.WriteLiME(&lime, m, rs, le))
	r := bytes.NewReader(lime.Bytes())
	d, err := OpenReaderAt(r, r.Size(), Options{})
	require.NoError(t, err)
	assert.Equal(t, "", d.Arch().Name)
	_, err = d.Kernel()
	assert.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	assert.ErrorIs(t, err, memory.ErrUnknownTarget)
	errshape.Require(t, err)

	d, err = OpenReaderAt(r, r.Size(), Options{Arch: "i686"})
	require.NoError(t, err)
	assert.Equal(t, Arch{Name: "i386", Target: memory.Target{ByteOrder: le, PtrSize: 4, PageSize: 4096}, Source: "option"}, d.Arch())

	m, rs = imageMemory(le, infoX86)
	lime.Reset()
	require.NoError(t, testutil.WriteLiME(&lime, m, rs, le))
	r = bytes.NewReader(lime.Bytes())
	_, err = OpenReaderAt(r, r.Size(), Options{Arch: "arm64"})
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	assert.True(t, errors.Is(err, memory.ErrCorrupt))
}
