package extract

import (
	"errors"
	"fmt"
	"hash/maphash"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// symbolSums is what "kdump-syms all" prints for a dump, one line per
// symbol, and the errors of the finders, as a hash of each line: not the
// text (a riscv64 guest has 1.3 million symbols, 43 MB). A line that
// differs is printed by decoding the dump again.
type symbolSums struct {
	paths []string
	sums  []uint64
}

// lineSeed seeds the line hashes of one test binary.
var lineSeed = maphash.MakeSeed()

// line returns line i of the dump's symbols, decoding it again.
func (s *symbolSums) line(i int) string {
	n, out := 0, "(none)"
	if err := eachSymbolLine(s.paths, func(line []byte) bool {
		if n == i {
			out = string(line)
			return false
		}
		n++
		return true
	}); err != nil {
		return err.Error()
	}
	return out
}

// eachSymbolLine decodes the dump in paths and calls f with each line of
// what "kdump-syms all" prints (and the errors of the finders), until f
// returns false. The line is only valid during the call.
func eachSymbolLine(paths []string, f func(line []byte) bool) error {
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
	if err != nil {
		return err
	}
	defer s.Close()
	var b []byte
	for sym, err := range s.Chain().All() {
		b = b[:0]
		if err != nil {
			// A page absent from the input may be absent from the extract
			// in another way (excluded, or not written): the same finder
			// failing for want of a page is the same outcome.
			var fe *symfinder.FinderError
			if errors.Is(err, memory.ErrNotSaved) && errors.As(err, &fe) {
				b = append(b, "error: "+fe.Finder+": a page not in the dump"...)
			} else {
				b = append(b, "error: "+err.Error()...)
			}
		} else {
			b = strconv.AppendUint(b, sym.Addr, 16)
			b = append(append(append(b, ' ', byte(sym.Kind), ' '), sym.Name...), '\t')
			b = append(append(b, sym.Module...), '\n')
		}
		if !f(b) {
			break
		}
	}
	return nil
}

// allSymbols hashes eachSymbolLine's lines.
func allSymbols(paths []string) (*symbolSums, error) {
	s := &symbolSums{paths: paths}
	err := eachSymbolLine(paths, func(line []byte) bool {
		s.sums = append(s.sums, maphash.Bytes(lineSeed, line))
		return true
	})
	return s, err
}

// checkSameSymbols fails the test unless the dump in paths decodes to want,
// line for line; it compares while decoding, keeping nothing.
func checkSameSymbols(t *testing.T, want *symbolSums, paths []string) {
	t.Helper()
	i := 0
	var diff string
	err := eachSymbolLine(paths, func(line []byte) bool {
		if i >= len(want.sums) {
			diff = fmt.Sprintf("more symbols than the input's %d: %q", len(want.sums), line)
			return false
		}
		if maphash.Bytes(lineSeed, line) != want.sums[i] {
			diff = fmt.Sprintf("symbol %d:\n want %q\n  got %q", i, want.line(i), line)
			return false
		}
		i++
		return true
	})
	if err != nil {
		t.Fatalf("the extract does not open: %v", err)
	}
	if diff == "" && i != len(want.sums) {
		diff = fmt.Sprintf("%d symbols, the input has %d", i, len(want.sums))
	}
	if diff != "" {
		t.Fatal(diff)
	}
}

// extractCase is one extract TestCorpusExtract makes: a guest's dump, and
// the output format asked for ("" keeps the input's container).
type extractCase struct {
	format testutil.DumpFormat
	out    string
}

// extractSample are the extracts TestCorpusExtract makes in the default
// run: each writer (ELF from ELF, ELF from kdump, kdump, flattened kdump,
// split kdump) and each architecture family, not every guest and format
// (testutil.Thorough makes them all). Decoding itself is checked on every
// dump by the root package's TestSessionCorpus.
var extractSample = map[string][]extractCase{
	// x86_64: ELF to ELF; makedumpfile's kdump kept. The -short guest.
	"deb13-6.12-amd64": {{testutil.DumpQEMUELF, ""}, {testutil.DumpZlib, ""}},
	// A split set, written as two files again; a 5.10 kernel, whose
	// kallsyms scan reads pages the extract drops.
	"deb11-5.10-amd64": {{testutil.DumpSplit, ""}},
	// 32-bit x86 without KALLSYMS_ALL: the modules found by scanning.
	"deb11-5.10-i386": {{testutil.DumpQEMUELF, ""}},
	// QEMU's arm64 kdump numbers pages in 64 KiB blocks, not the
	// kernel's 4 KiB pages; no KALLSYMS_ALL.
	"deb12-6.1-arm64": {{testutil.DumpQEMUKdumpZlib, ""}},
	// arm64 with 52-bit VAs (LPA2): five levels of page tables.
	"deb13-6.12-arm64": {{testutil.DumpQEMUELF, ""}},
	// 32-bit ARM, no VMCOREINFO note: the note's pages found by the scan.
	"deb13-6.12-armhf": {{testutil.DumpQEMUELF, ""}},
	// ppc64 (little-endian), VMCOREINFO found by the scan.
	"deb13-6.12-ppc64el": {{testutil.DumpQEMUELF, ""}},
	// Big-endian: QEMU's flattened kdump kept, and made an ELF (the one
	// kdump made ELF); VMCOREINFO through the lowcore.
	"deb13-6.12-s390x": {{testutil.DumpQEMUKdumpZlib, ""}, {testutil.DumpQEMUKdumpZlib, "elf"}},
	// riscv64, 1.2 million module symbols.
	"deb13-6.12-riscv64": {{testutil.DumpQEMUELF, ""}},
	// A real kdump capture: the capture kernel's /proc/vmcore (its ELF
	// header built by the kernel, kexec_file_load), and makedumpfile's -d 31.
	"deb13-6.12-kdump-amd64": {{testutil.DumpProcVmcore, ""}, {testutil.DumpZlib, ""}},
}

// extractCases returns the extracts TestCorpusExtract makes of g: its
// extractSample entry (with -short, its first: the ELF the short guest's
// one dump is; -short reads no other format of a guest, and TestWriteKdump
// checks the kdump writer), or with testutil.Thorough every available
// dump, kept, and the zlib kdumps also made ELF.
func extractCases(g *testutil.CorpusGuest) []extractCase {
	if !testutil.Thorough() {
		cs := extractSample[g.Name]
		if testing.Short() {
			cs = cs[:min(1, len(cs))]
		}
		return cs
	}
	var out []extractCase
	for _, f := range g.AvailableDumps() {
		out = append(out, extractCase{f, ""})
		if f == testutil.DumpZlib || f == testutil.DumpQEMUKdumpZlib {
			out = append(out, extractCase{f, "elf"})
		}
	}
	return out
}

// TestCorpusExtract extracts corpus dumps (the full dumps of the cache,
// else the committed extracts, which then extract to themselves) and
// checks that each extract decodes to exactly the same symbols as its
// input.
func TestCorpusExtract(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		cases := extractCases(g)
		if len(cases) == 0 {
			continue
		}
		t.Run(g.Name, func(t *testing.T) {
			// Every dump of a guest holds the same kernel memory and decodes
			// to the same symbols (the root package's TestSessionCorpus
			// checks each against /proc/kallsyms), so the input is decoded
			// once per guest and every extract compared with it.
			var want *symbolSums
			for _, c := range cases {
				name := string(c.format)
				if c.out != "" {
					name += "/" + c.out
				}
				t.Run(name, func(t *testing.T) {
					paths, ok := g.DumpPaths(c.format)
					if !ok {
						t.Skipf("no %s dump of %s: run testdata/vmcores/generate", c.format, g.Name)
					}
					if want == nil {
						var err error
						if want, err = allSymbols(paths); err != nil {
							t.Skipf("the input itself does not open: %v", err)
						}
					}
					if len(want.sums) <= 10000 {
						t.Fatalf("the input decodes to %d symbols", len(want.sums))
					}
					out := filepath.Join(t.TempDir(), "x")
					start := time.Now()
					res, err := Extract(out, paths, Options{Format: c.out})
					require.NoError(t, err)
					t.Logf("format %q: %d pages, %d bytes in %d file(s), %s", res.Format, res.Pages, res.Bytes, len(res.Files), time.Since(start))
					if c.out == "" {
						require.Len(t, res.Files, len(paths))
					}
					checkSameSymbols(t, want, res.Files)
				})
			}
		})
	}
}

// TestCommittedExtractsWrapped opens the committed extracts as they are,
// xz-wrapped, through vmcore, which decompresses them itself.
//
// Two guests are enough for the wrapped path (a 32-bit little-endian and
// a big-endian ELF core); every extract is opened decompressed by the
// other corpus tests. -short, whose guest is neither, leaves it to the
// examples, which open deb13-6.12-amd64's committed .xz.
func TestCommittedExtractsWrapped(t *testing.T) {
	guests := testutil.Sample(t, "deb11-5.10-i386", "deb13-6.12-s390x")
	if len(guests) == 0 {
		t.Skip("no sampled guest in this run")
	}
	for _, g := range guests {
		f := testutil.DumpQEMUELF
		if g.IsCapture() {
			f = testutil.DumpProcVmcore // a capture's ELF core: the copy of /proc/vmcore
		}
		files, ok := g.ExtractFiles(f)
		if !ok {
			t.Fatalf("%s: no committed extract of %s", g.Name, f)
		}
		d, err := vmcore.Open(files...)
		require.NoError(t, err)
		require.Equal(t, "xz+elf", d.Format())
		require.Equal(t, g.Uname(t), d.Info().OSRelease())
		d.Close()
	}
}
