package vmcore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// TestXZDicts: the block headers of every stream of an xz file are found
// through their indexes and a dictionary over maxXZDict is refused before
// the decoder allocates it; concatenated streams with padding pass; every
// cut of a file is an error, never a panic.
func TestXZDicts(t *testing.T) {
	one := compress(t, "xz", onePageCore())
	require.NoError(t, checkXZDicts(bytes.NewReader(one), int64(len(one))))

	two := bytes.Join([][]byte{one, make([]byte, 8), compress(t, "xz", []byte("second stream")), make([]byte, 4)}, nil)
	require.NoError(t, checkXZDicts(bytes.NewReader(two), int64(len(two))))

	// The first block's LZMA2 properties: after the stream header, the
	// block header's size and flags bytes, the filter's ID and size.
	require.Equal(t, []byte{0x21, 0x01}, one[xzHeader+2:xzHeader+4], "one LZMA2 filter, no sizes")
	for _, c := range []struct {
		code byte
		ok   bool
	}{{28, true}, {32, true}, {33, false}, {40, false}} { // 64 MiB (xz -9), 256 MiB, 384 MiB, 4 GiB
		big := bytes.Clone(two)
		big[xzHeader+4] = c.code
		err := checkXZDicts(bytes.NewReader(big), int64(len(big)))
		if c.ok {
			assert.NoError(t, err, "code %d", c.code)
			continue
		}
		require.ErrorIs(t, err, ErrTooLarge, "code %d", c.code)
		errshape.Require(t, err, "offset 0xc", "MiB LZMA2 dictionary")
		// Open refuses it the same, before decompressing.
		path := writeTemp(t, big)
		_, err = OpenWith(Options{TempDir: t.TempDir()}, path)
		assert.ErrorIs(t, err, ErrTooLarge)
	}
	// The second stream's block is found too.
	big := bytes.Clone(two)
	big[len(one)+8+xzHeader+4] = 40
	assert.ErrorIs(t, checkXZDicts(bytes.NewReader(big), int64(len(big))), ErrTooLarge)

	for cut := range len(two) {
		err := checkXZDicts(bytes.NewReader(two[:cut]), int64(cut))
		if cut == 0 {
			continue // nothing: no stream to check
		}
		// The first stream whole, with 0, 4 or 8 bytes of its padding;
		// both streams, without the last padding.
		if cut == len(one) || cut == len(one)+4 || cut == len(one)+8 || cut == len(two)-4 {
			assert.NoError(t, err, "cut %d: whole streams", cut)
			continue
		}
		if !assert.Error(t, err, "cut %d", cut) {
			continue
		}
		if !errors.Is(err, memory.ErrCorrupt) {
			t.Errorf("cut %d: %v, not corrupt", cut, err)
		}
	}
}

// FuzzXZDicts: any bytes end the check with nil or an error, never a
// panic, and a nil answer is one the decoder can be trusted with: every
// LZMA2 dictionary named is at most maxXZDict.
func FuzzXZDicts(f *testing.F) {
	one := compress(f, "xz", onePageCore())
	f.Add(one)
	f.Add(bytes.Join([][]byte{one, make([]byte, 4), one}, nil))
	f.Add(one[:len(one)-5])
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkXZDicts(bytes.NewReader(b), int64(len(b)))
	})
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dump.xz")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}
