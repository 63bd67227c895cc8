package vmcore

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// cacheEntries lists the names in dir.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestCache(t *testing.T) {
	t.Parallel()
	core := testCore(true)
	cache := filepath.Join(t.TempDir(), "cache")
	p := writeFile(t, t.TempDir(), "dump.xz", compress(t, "xz", core))
	key, err := contentKey(bytes2RA(t, p))
	require.NoError(t, err)
	entry := filepath.Join(cache, key+cacheSuffix)

	open := func(opt Options) *Dump {
		t.Helper()
		d, err := OpenWith(opt, p)
		require.NoError(t, err)
		var b [16]byte
		require.NoError(t, memory.ReadFull(d.Physical(), b[:], 16<<20))
		assert.Equal(t, pattern(16, 2), b[:])
		assert.Equal(t, "xz+elf", d.Format())
		return d
	}
	d := open(Options{CacheDir: cache})
	require.NoError(t, d.Close())
	assert.Equal(t, []string{key + cacheSuffix}, cacheEntries(t, cache), "one complete entry, no temporary file")
	st, err := os.Stat(entry)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dst, err := os.Stat(cache)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dst.Mode().Perm())
	raw, err := os.ReadFile(entry)
	require.NoError(t, err)
	assert.Equal(t, core, raw)

	t.Run("hit", func(t *testing.T) {
		old := time.Now().Add(-time.Hour)
		require.NoError(t, os.Chtimes(entry, old, old))
		d := open(Options{CacheDir: cache})
		require.NoError(t, d.Close())
		st2, err := os.Stat(entry)
		require.NoError(t, err)
		assert.True(t, os.SameFile(st, st2), "the entry is reused, not rewritten")
		assert.True(t, st2.ModTime().After(old), "a hit refreshes the entry's time")
	})

	t.Run("replaced file", func(t *testing.T) {
		other := testCore(false)
		q := writeFile(t, t.TempDir(), "dump.xz", compress(t, "xz", other))
		require.NoError(t, os.Rename(q, p)) // same name, new content
		t.Cleanup(func() { writeFile(t, filepath.Dir(p), "dump.xz", compress(t, "xz", core)) })
		d, err := OpenWith(Options{CacheDir: cache}, p)
		require.NoError(t, err)
		require.NoError(t, d.Close())
		assert.Len(t, cacheEntries(t, cache), 2, "a new entry for the new content")
		k2, err := contentKey(bytes2RA(t, p))
		require.NoError(t, err)
		raw, err := os.ReadFile(filepath.Join(cache, k2+cacheSuffix))
		require.NoError(t, err)
		assert.Equal(t, other, raw)
	})

	t.Run("eviction", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "c")
		a := writeFile(t, t.TempDir(), "a.gz", compress(t, "gzip", core))
		b := writeFile(t, t.TempDir(), "b.gz", compress(t, "gzip", testCore(false)))
		opt := Options{CacheDir: dir, CacheMaxBytes: int64(len(core)) + 1}
		for _, f := range []string{a, b} {
			d, err := OpenWith(opt, f)
			require.NoError(t, err)
			require.NoError(t, d.Close())
		}
		kb, err := contentKey(bytes2RA(t, b))
		require.NoError(t, err)
		assert.Equal(t, []string{kb + cacheSuffix}, cacheEntries(t, dir), "the least recently used entry is removed")
	})

	t.Run("larger than the cap", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "c")
		d := open(Options{CacheDir: dir, CacheMaxBytes: 100})
		require.NoError(t, d.Close())
		assert.Empty(t, cacheEntries(t, dir))
	})

	t.Run("failed decompression leaves nothing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "c")
		bad := writeFile(t, t.TempDir(), "bad.zst", compress(t, "zstd", core)[:200])
		_, err := OpenWith(Options{CacheDir: dir}, bad)
		require.Error(t, err)
		assert.Empty(t, cacheEntries(t, dir))
	})

	t.Run("directory open to others", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o777))
		_, err := OpenWith(Options{CacheDir: dir}, p)
		require.ErrorIs(t, err, ErrUnsafeCache)
	})
}

// bytes2RA opens p for contentKey.
func bytes2RA(t *testing.T, p string) (*os.File, int64) {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	require.NoError(t, err)
	return f, st.Size()
}
