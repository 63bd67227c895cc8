package kdumpsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// withInfoCheck returns opt with the kallsyms check of VMCOREINFO that
// vmcore runs when a container's copy and the note in memory differ,
// unless the caller set one.
func withInfoCheck(opt vmcore.Options) vmcore.Options {
	if opt.ValidateInfo == nil {
		opt.ValidateInfo = stextMatchesKallsyms
	}
	return opt
}

// stextMatchesKallsyms decodes the kallsyms tables with info and checks
// that their _stext is info's SYMBOL(_stext): the tables are found and
// checked against VMCOREINFO, so a text from another kernel, or another
// boot of it (KASLR), fails. The tables are opened lazily: one name is
// looked up (through seqs_of_names since 6.2), before the session loads
// them for its own use.
func stextMatchesKallsyms(kmem memory.Reader, info *vmcoreinfo.Info) (string, error) {
	want, ok := info.Symbol("_stext")
	if !ok {
		return "", fmt.Errorf("no SYMBOL(_stext): %w", vmcoreinfo.ErrMissingInfo)
	}
	res, err := kallsyms.Load(kmem, info, kallsyms.Options{Lazy: true})
	if err != nil {
		return "", err
	}
	var got []uint64
	err = res.Finder().Find(symfinder.Query{Kind: symfinder.ByName, Name: "_stext"}, func(s symfinder.Symbol) bool {
		got = append(got, s.Addr)
		return true
	})
	switch {
	case err != nil:
		return "", err
	case len(got) == 0:
		return "", fmt.Errorf("kallsyms has no _stext")
	case got[0] != want:
		return "", fmt.Errorf("SYMBOL(_stext)=%#x, kallsyms says %#x", want, got[0])
	}
	return "_stext matches kallsyms", nil
}
