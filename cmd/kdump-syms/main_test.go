package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// TestMain points the user's cache directory (where run keeps decompressed
// wrapped dumps) at a temporary one, so that tests never write to the home
// directory of whoever runs them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kdump-syms-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
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
