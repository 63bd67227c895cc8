package kdumpsyms

import (
	"io"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// OpenReaderAt opens a dump of size bytes held in r (a dump in memory or
// in object storage behind an io.ReaderAt) and builds its symbol chain, as
// Open does for a path. The caller keeps r open while the session is used;
// Close does not close it. A wrapped dump (.xz, .zst, .gz) is decompressed
// to a temporary file, removed by Close.
//
// Errors are those of vmcore.OpenReaderAt and of reading the extra files
// opt names.
func OpenReaderAt(opt Options, r io.ReaderAt, size int64) (*Session, error) {
	st := newStats()
	t := st.begin("open")
	d, err := vmcore.OpenReaderAt(r, size, withInfoCheck(opt.Dump))
	st.end(t)
	if err != nil {
		return nil, err
	}
	return newSession(opt, d, st)
}

// FromDump builds a session over a dump the caller has already opened
// with vmcore (opt.Dump is not used). The session owns d from then on:
// Close closes it, and so does a failure here.
func FromDump(opt Options, d *vmcore.Dump) (*Session, error) {
	return newSession(opt, d, newStats())
}

func newSession(opt Options, d *vmcore.Dump, st *Stats) (*Session, error) {
	s := &Session{dump: d, opt: opt, stats: st}
	s.kernel = sync.OnceValues(s.loadKernel)
	s.kallsyms = sync.OnceValues(s.loadKallsyms)
	s.modules = sync.OnceValues(s.loadModules)
	s.crash = sync.OnceValue(s.findCrash)
	s.kaslr = sync.OnceValues(s.findKASLROffset)
	s.tasksOnce = sync.OnceValues(s.listTasks)
	var err error
	if s.chain, err = s.buildChain(); err != nil {
		d.Close()
		return nil, err
	}
	return s, nil
}
