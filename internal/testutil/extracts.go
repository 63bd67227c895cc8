package testutil

// The committed corpus extracts: for each guest, testdata/vmcores/<guest>/dumps/
// holds `kdump-syms extract` outputs of some cached dumps, xz-compressed
// (<file>.xz, split dumps <file>.1.xz and <file>.2.xz), and SOURCES, the
// sha256 of the dumps they were made from. DumpPaths falls back to them
// when the cache lacks a dump, so the corpus tests run on a fresh clone.
// They are made by testdata/vmcores/extract-corpus.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ulikunitz/xz"
)

// ExtractsDirName is the directory of a guest's committed extracts.
const ExtractsDirName = "dumps"

// extractCacheEnv overrides where decompressed extracts are kept (default:
// the user cache directory's kdump-syms-test/extracts).
const extractCacheEnv = "KDUMP_SYMS_EXTRACT_CACHE"

// FullDumpPaths returns the cache paths of a dump format (two for
// DumpSplit) and whether all of them exist: the full dumps generate makes.
func (g *CorpusGuest) FullDumpPaths(f DumpFormat) ([]string, bool) {
	var out []string
	ok := true
	for _, n := range f.Files() {
		p := filepath.Join(g.CacheDir, n)
		if _, err := os.Stat(p); err != nil {
			ok = false
		}
		out = append(out, p)
	}
	return out, ok
}

// IsExtract reports whether DumpPaths returns the committed extract of the
// format rather than the full dump: the full dump is not in the cache and
// an extract is committed. An extract holds only the pages symbol decoding
// reads, so tests of whole memory (page counts, every page, the
// VMCOREINFO note in memory) need RequireFullDump instead.
func (g *CorpusGuest) IsExtract(f DumpFormat) bool {
	if _, ok := g.FullDumpPaths(f); ok {
		return false
	}
	_, ok := g.ExtractPaths(f)
	return ok
}

// RequireFullDump is RequireDump for tests that need the full dump: it
// skips when only the committed extract is there. It looks at the cache
// first, and decompresses no extract to skip.
func (g *CorpusGuest) RequireFullDump(tb testing.TB, f DumpFormat) []string {
	tb.Helper()
	if g.Manifest != nil && !g.HasFormat(f) {
		tb.Skipf("corpus guest %s has no %s dump (not made for this guest)", g.Name, f)
	}
	if p, ok := g.FullDumpPaths(f); ok {
		return p
	}
	if _, ok := g.ExtractFiles(f); ok {
		tb.Skipf("corpus dump %s/%s: only the committed extract is here, and the test needs the full dump: %s", g.Name, f, generateHint)
	}
	tb.Skipf("corpus dump %s/%s not in %s: %s", g.Name, f, filepath.Dir(g.CacheDir), generateHint)
	return nil
}

// ExtractFiles returns the committed, compressed extract files of a format
// and whether they are all there and were made from the dumps SHA256SUMS
// lists (an extract of other dumps than the ground truth's is stale).
func (g *CorpusGuest) ExtractFiles(f DumpFormat) ([]string, bool) {
	if g.Dir == "" {
		return nil, false
	}
	dir := filepath.Join(g.Dir, ExtractsDirName)
	src := readSources(filepath.Join(dir, "SOURCES"))
	sums := readSums(filepath.Join(filepath.Dir(g.Dir), "SHA256SUMS"))
	var out []string
	for _, n := range f.Files() {
		p := filepath.Join(dir, n+".xz")
		if _, err := os.Stat(p); err != nil {
			return nil, false
		}
		key := g.Name + "/" + n
		if want, ok := sums[key]; ok && src[key] != want {
			return nil, false
		}
		out = append(out, p)
	}
	return out, true
}

// ExtractPaths returns the committed extract of a format, decompressed
// (once per machine, into a cache directory keyed by the compressed
// file's hash), and whether it is available.
func (g *CorpusGuest) ExtractPaths(f DumpFormat) ([]string, bool) {
	files, ok := g.ExtractFiles(f)
	if !ok {
		return nil, false
	}
	var out []string
	for _, p := range files {
		plain, err := decompressedExtract(p)
		if err != nil {
			return nil, false
		}
		out = append(out, plain)
	}
	return out, true
}

var extractMu sync.Mutex

// extractMemo maps an xz file and the cache directory to the path
// decompressedExtract gave for them in this process, so that a test
// process reads and hashes each compressed file once, not on every
// DumpPaths call. Guarded by extractMu.
var extractMemo = map[[2]string]string{}

// extractCacheDir is where decompressed extracts are kept.
func extractCacheDir() string {
	if dir := os.Getenv(extractCacheEnv); dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "kdump-syms-test", "extracts")
}

// PinExtractCache fixes where decompressed extracts are kept to where they
// are kept now, for a test binary about to point the user's cache
// directory elsewhere (cmd/kdump-syms keeps the CLI's own cache out of the
// user's): without it, every such run decompresses every extract again.
func PinExtractCache() error { return os.Setenv(extractCacheEnv, extractCacheDir()) }

// decompressedExtract returns the path of xzPath decompressed, making it
// when it is not in the cache yet. Files are written under a temporary name
// and renamed, so concurrent test processes never see a partial file.
func decompressedExtract(xzPath string) (string, error) {
	extractMu.Lock()
	defer extractMu.Unlock()
	key := [2]string{xzPath, extractCacheDir()}
	if out, ok := extractMemo[key]; ok {
		if _, err := os.Stat(out); err == nil {
			return out, nil
		}
	}
	b, err := os.ReadFile(xzPath)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	dir := filepath.Join(key[1], hex.EncodeToString(sum[:8]))
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(xzPath), ".xz"))
	if _, err := os.Stat(out); err == nil {
		extractMemo[key] = out
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	r, err := xz.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("%s: %w", xzPath, err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	_, err = io.Copy(bw, r)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("%s: %w", xzPath, err)
	}
	extractMemo[key] = out
	return out, nil
}

// readSources reads a SOURCES or SHA256SUMS file ("<sha256>  <guest>/<file>"
// lines); a missing file is an empty map.
func readSources(p string) map[string]string { return readSums(p) }

func readSums(p string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(p)
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if sum, name, ok := strings.Cut(strings.TrimSpace(line), "  "); ok {
			out[name] = sum
		}
	}
	return out
}
