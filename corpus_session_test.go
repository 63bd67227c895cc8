package kdumpsyms_test

import (
	"os"
	"sync"
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

type sessionMemo struct {
	once sync.Once
	s    *kdumpsyms.Session
	err  error
}

var sharedSessions struct {
	sync.Mutex
	m map[sessionKey]*sessionMemo
}

// oneDumpSession returns the shared session of the guest's one dump,
// opened with Options{Lazy: lazy}, and the dump's format; it skips the
// test when the guest has no dump here.
func oneDumpSession(t *testing.T, g *testutil.CorpusGuest, lazy bool) (*kdumpsyms.Session, testutil.DumpFormat) {
	t.Helper()
	f, ok := g.OneDump()
	if !ok {
		t.Skipf("no dumps of %s in the cache: run testdata/vmcores/generate", g.Name)
	}
	k := sessionKey{g.Name, lazy}
	sharedSessions.Lock()
	if sharedSessions.m == nil {
		sharedSessions.m = map[sessionKey]*sessionMemo{}
	}
	m := sharedSessions.m[k]
	if m == nil {
		m = new(sessionMemo)
		sharedSessions.m[k] = m
	}
	sharedSessions.Unlock()
	m.once.Do(func() {
		paths, _ := g.DumpPaths(f)
		m.s, m.err = kdumpsyms.Open(kdumpsyms.Options{Lazy: lazy}, paths...)
	})
	if m.err != nil {
		t.Fatalf("%s/%s: %v", g.Name, f, m.err)
	}
	return m.s, f
}

// closeSharedSessions closes what oneDumpSession opened.
func closeSharedSessions() {
	sharedSessions.Lock()
	defer sharedSessions.Unlock()
	for _, m := range sharedSessions.m {
		if m.s != nil {
			m.s.Close()
		}
	}
	sharedSessions.m = nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	closeSharedSessions()
	os.Exit(code)
}
