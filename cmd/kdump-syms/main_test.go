package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// testDir is a temporary directory of the test process, removed when it
// ends: the user's cache directory is under it, and the memory images
// sharedImages converts.
var testDir string

// TestMain points the user's cache directory (where run keeps decompressed
// wrapped dumps) at a temporary one, so that tests never write to the home
// directory of whoever runs them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kdump-syms-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	// The decompressed corpus extracts stay where every other test
	// package finds them.
	if err := testutil.PinExtractCache(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var sharedImageSets testutil.OnceMap[string, testutil.Images]

// sharedImages returns testutil.ConvertImages of the ELF core at elfPath,
// converted once per test process into testDir: several tests read the
// same guest's images, and converting one extract writes three copies of
// it (the AVML one snappy-compressed). Callers must not modify the files.
func sharedImages(t *testing.T, elfPath string) testutil.Images {
	t.Helper()
	im, err := sharedImageSets.Get(elfPath, func() (testutil.Images, error) {
		dir, err := os.MkdirTemp(testDir, "images-")
		if err != nil {
			return testutil.Images{}, err
		}
		return testutil.ConvertImages(elfPath, dir)
	})
	if err != nil {
		t.Fatalf("converting %s: %v", elfPath, err)
	}
	return im
}
