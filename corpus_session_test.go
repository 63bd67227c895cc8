package kdumpsyms_test

import (
	"os"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// The corpus tests of this package decode each guest's one dump (see
// testutil.CorpusGuest.OneDump) once, in a session they share, rather than
// each test opening and decoding it again: TestSessionCorpus prints it
// whole, TestLookupKernelRules looks addresses up in it, the module and
// ORC tests read its module list. A shared session is read only: a test
// that wants another chain order builds its own symfinder.Chain from the
// session's finders (see chainOf).

type sessionKey struct {
	guest string
	lazy  bool
}

var sharedSessions testutil.OnceMap[sessionKey, *kdumpsyms.Session]

// oneDumpSession returns the shared session of the guest's one dump,
// opened with Options{Lazy: lazy}, and the dump's format; it skips the
// test when the guest has no dump here.
func oneDumpSession(t *testing.T, g *testutil.CorpusGuest, lazy bool) (*kdumpsyms.Session, testutil.DumpFormat) {
	t.Helper()
	f, ok := g.OneDump()
	if !ok {
		t.Skipf("no dumps of %s in the cache: run testdata/vmcores/generate", g.Name)
	}
	s, err := sharedSessions.Get(sessionKey{g.Name, lazy}, func() (*kdumpsyms.Session, error) {
		paths, _ := g.DumpPaths(f)
		return kdumpsyms.Open(kdumpsyms.Options{Lazy: lazy}, paths...)
	})
	if err != nil {
		t.Fatalf("%s/%s: %v", g.Name, f, err)
	}
	return s, f
}

func TestMain(m *testing.M) {
	code := m.Run()
	sharedSessions.Drain(func(s *kdumpsyms.Session) { s.Close() })
	os.Exit(code)
}
