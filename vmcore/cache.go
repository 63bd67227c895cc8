package vmcore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// DefaultCacheMaxBytes is the default cap on the decompressed dumps kept in
// Options.CacheDir: 4 GiB, about four 1 GiB guests' dumps.
const DefaultCacheMaxBytes = 4 << 30

// cacheSuffix ends the name of every cache entry: <sha256>.vmcore.
const cacheSuffix = ".vmcore"

// cached returns the cache entry for wrapped r, decompressing it into the
// cache first when it is not there.
//
// An entry is named by the SHA-256 of the wrapped file's content, so a
// replaced file is never answered from a stale entry. It is written to an
// unnamed temporary file in the cache directory and linked under its name
// only once complete, so an entry is complete or absent, and a run that is
// interrupted leaves nothing. A hit refreshes the entry's modification
// time; after an entry is added, the least recently used ones are removed
// until the entries fit Options.CacheMaxBytes. A dump larger than the cap
// is decompressed but not kept.
//
// The directory is created with mode 0700; one that exists must belong to
// the user and be closed to others, or it is an error: an entry planted by
// someone else would be answered as the dump.
func cached(r io.ReaderAt, size int64, wrapper string, opt Options) (*unwrapped, error) {
	dir := opt.CacheDir
	if err := checkCacheDir(dir); err != nil {
		return nil, err
	}
	key, err := contentKey(r, size)
	if err != nil {
		return nil, fmt.Errorf("hashing the %s file: %w", wrapper, err)
	}
	entry := filepath.Join(dir, key+cacheSuffix)
	if st, err := os.Lstat(entry); err == nil && st.Mode().IsRegular() {
		now := time.Now()
		os.Chtimes(entry, now, now) // LRU order; a failure only ages it
		return &unwrapped{path: entry}, nil
	}
	tmp, err := newTempFile(dir)
	if err != nil {
		return nil, err
	}
	if err := decompress(tmp.File, r, size, wrapper, opt); err != nil {
		tmp.discard()
		return nil, err
	}
	st, err := tmp.Stat()
	if err != nil {
		tmp.discard()
		return nil, err
	}
	limit := opt.CacheMaxBytes
	if limit <= 0 {
		limit = DefaultCacheMaxBytes
	}
	if st.Size() > limit {
		return &unwrapped{path: tmp.path(), tmp: tmp}, nil
	}
	if err := tmp.Sync(); err != nil {
		tmp.discard()
		return nil, err
	}
	err = tmp.link(entry)
	tmp.discard()                                   // once renamed, a named file has nothing left to remove
	if err != nil && !errors.Is(err, fs.ErrExist) { // another run added it first
		return nil, err
	}
	evict(dir, limit, entry)
	return &unwrapped{path: entry, added: err == nil}, nil
}

// ErrUnsafeCache means the cache directory is not the user's own: others
// could read the decompressed dumps or plant an entry. The dump is not
// opened; the user fixes the directory or opts out of the cache.
var ErrUnsafeCache = errors.New("unsafe cache directory")

// checkCacheDir creates dir (mode 0700) or checks that it is a directory of
// the user's that others cannot write to or read.
func checkCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("cache %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("cache directory %s is open to others (mode %#o); make it 0700: %w", dir, st.Mode().Perm(), ErrUnsafeCache)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("cache directory %s belongs to uid %d, not to this user: %w", dir, sys.Uid, ErrUnsafeCache)
	}
	return nil
}

// evict removes the least recently used entries of dir until they add up
// to at most limit bytes, never keep. Errors are ignored: a cache that
// cannot be trimmed is still a cache.
func evict(dir string, limit int64, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type entry struct {
		path  string
		size  int64
		mtime time.Time
	}
	var all []entry
	var total int64
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), cacheSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		all = append(all, entry{filepath.Join(dir, e.Name()), info.Size(), info.ModTime()})
		total += info.Size()
	}
	slices.SortFunc(all, func(a, b entry) int { return a.mtime.Compare(b.mtime) })
	for _, e := range all {
		if total <= limit {
			break
		}
		if e.path == keep {
			continue
		}
		if os.Remove(e.path) == nil {
			total -= e.size
		}
	}
}
