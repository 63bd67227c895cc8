package kdumpsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/crash"
	"github.com/kdumpsyms/kdumpsyms/printk"
)

// Log opens the kernel log of the dump (see printk.Open). Only kernels
// before 5.10 make it look up a symbol (log_first_seq, for sequence
// numbers), and only then are the kernel's symbols decoded.
//
// Errors are those of printk.Open, or of translating kernel addresses.
func (s *Session) Log() (*printk.Log, error) {
	kmem, err := s.Kernel()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: kernel log: %w", err)
	}
	return printk.Open(kmem, s.dump.Info(), printk.Options{
		Target: s.target(),
		Symbol: func(name string) (uint64, bool) {
			sym, err := s.chain.LookupName(name)
			return sym.Addr, err == nil
		},
	})
}

// Crash returns what the dump says of its crash, once: crash.Find over the
// kernel log and the pr_pid of each CPU register note (Dump().CPUs()), so
// that Note indexes Dump().CPUs().
func (s *Session) Crash() *crash.Facts { return s.crash() }

func (s *Session) findCrash() *crash.Facts {
	l, err := s.Log()
	var pids []int32
	for _, c := range s.dump.CPUs() {
		pids = append(pids, c.PID)
	}
	return crash.Find(l, err, pids)
}
