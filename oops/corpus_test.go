package oops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// TestOopsConsoleLogs takes the kernel's own printed call traces (the
// console logs captured with the corpus dumps) as the oracle: every frame
// "sym+off/size" resolves in reverse to an address whose lookup (at addr-1
// on x86, %pB; as is elsewhere, %pS) prints exactly what the kernel
// printed, size included; where the kernel printed the address too
// (s390x's "[<addr>] sym+off/size"), it is the same address.
func TestOopsConsoleLogs(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, g := range testutil.Corpus(t) {
		dump := ""
		for _, f := range []testutil.DumpFormat{testutil.DumpQEMUELF, testutil.DumpZstd, testutil.DumpZlib} {
			if p, ok := g.DumpPaths(f); ok {
				dump = p[0]
				break
			}
		}
		if dump == "" {
			continue
		}
		text, err := os.ReadFile(filepath.Join(g.Dir, "console.log"))
		if err != nil {
			continue
		}
		checked++
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			s, err := kdumpsyms.Open(kdumpsyms.Options{}, dump)
			require.NoError(t, err)
			defer s.Close()
			x86 := g.Arch() == "amd64" || g.Arch() == "i386"
			o := New(Options{Resolver: s.Chain(), Digits: 16, ReturnAddrs: x86})
			frames, ambiguous := 0, 0
			inTrace := false
			for line := range strings.Lines(string(text)) {
				if startsTrace(line) {
					inTrace = true
					continue
				}
				if armFrame.MatchString(line) {
					inTrace = true // 6.1's 32-bit ARM trace has no header line
				}
				if !inTrace || strings.Contains(line, "---[ end") {
					inTrace = false
					continue
				}
				toks := scanTokens(line, 16)
				for k, tok := range toks {
					if tok.kind != tokSymbol || !tok.hasSize {
						continue
					}
					a, ok := o.reverse(tok)
					if !ok {
						// Only where the kernel has several symbols of
						// that name, module and size: the frame's text
						// does not tell which one it is.
						same := 0
						all, err := s.Chain().SymbolsNamed(tok.name)
						require.NoError(t, err)
						for _, sym := range all {
							if sym.Module == tok.module && sym.Size == tok.size {
								same++
							}
						}
						assert.Greater(t, same, 1, "%q: no unique %s", line, tok.name)
						ambiguous++
						continue
					}
					q := a
					if x86 {
						q--
					}
					sym, err := s.Chain().Lookup(q)
					if !assert.NoError(t, err, line) {
						continue
					}
					assert.Equal(t, line[tok.start:tok.end], sym.Format(a), "%q", line)
					if k > 0 && toks[k-1].kind == tokAddr {
						assert.Equal(t, toks[k-1].addr, a, "%q", line)
					}
					frames++
				}
			}
			t.Logf("%d frames the kernel printed, %d more ambiguous by name and size", frames, ambiguous)
			// 32-bit ARM prints one sized symbol a line ("callee from
			// caller+off/size") and its sysrq crash's trace has four lines.
			assert.Greater(t, frames, map[bool]int{false: 5, true: 3}[g.Arch() == "armhf"])
		})
	}
	if checked == 0 {
		t.Skip("no corpus guest has a console.log")
	}
}
