package testutil

import (
	"os"
	"slices"
	"testing"
)

// ThoroughEnv, set to 1, makes every corpus test run on every guest and
// every dump format: what Sample narrows in the default run.
const ThoroughEnv = "KDUMP_SYMS_THOROUGH"

// Thorough reports whether ThoroughEnv asks for every guest and format.
func Thorough() bool { return os.Getenv(ThoroughEnv) == "1" }

// SkipShort skips the test in a go test -short run, with why in the skip
// message: -short runs each decoder on one guest and one format, and
// leaves a test of another path over the same decoding (a command-line
// flag, an output format, another guest's copy of a decoder -short checks
// on ShortGuest) to the default run. why names the test that -short
// still runs on that decoding, or says what else makes the test one to
// leave out.
func SkipShort(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("skipped with -short: " + why)
	}
}

// Sample returns the guests a variation test runs on: the named ones (in
// manifest order; those a -short run leaves out are dropped) in the default
// run, every guest of Corpus when Thorough.
//
// The default run checks every guest against the kernel's own files in
// each package's TestCorpus, TestSessionCorpus, TestAllCorpus, ..., and
// decodes every committed dump in those that depend on the container
// (TestSessionCorpus end to end, the container and translation tests;
// the others read SampleDumps). A test that checks another path
// over the same decoding (another flag, output format or layout source)
// runs on guests chosen for what that path depends on: architecture,
// pointer size, byte order, BTF or not, KALLSYMS_ALL or not. A test naming
// a guest the manifest lacks fails.
func Sample(tb testing.TB, names ...string) []*CorpusGuest {
	tb.Helper()
	all := Corpus(tb)
	if Thorough() {
		return all
	}
	known := allGuests(tb)
	for _, n := range names {
		if !slices.ContainsFunc(known, func(g *CorpusGuest) bool { return g.Name == n }) {
			tb.Fatalf("testutil: Sample names %q, which the corpus lacks", n)
		}
	}
	var out []*CorpusGuest
	for _, g := range all {
		if slices.Contains(names, g.Name) {
			out = append(out, g)
		}
	}
	return out
}

// SampleDumps returns the formats a test reads when it checks a decoder
// over the bytes the containers give rather than the containers
// themselves: the guest's one dump (see OneDump) in the default run, every
// format of AvailableDumps when Thorough. TestSessionCorpus decodes every
// format end to end in the default run, and the container packages' own
// corpus tests check their decoding.
func (g *CorpusGuest) SampleDumps() []DumpFormat {
	if Thorough() {
		return g.AvailableDumps()
	}
	if f, ok := g.OneDump(); ok {
		return []DumpFormat{f}
	}
	return nil
}
