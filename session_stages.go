package kdumpsyms

import "errors"

// A Stage is one step of decoding a dump's symbols.
type Stage struct {
	// Name is one of the Stage constants.
	Name string
	// Run does the step. The sources it loads load once: running it
	// again returns the errors the first run found.
	Run func() error
}

// The names of the stages Stages returns, in their order.
const (
	StageTranslation = NeedTranslation // the kernel's address space
	StageKallsyms    = FinderKallsyms  // the core kernel's symbols
	StageModules     = FinderModules   // the module list, with the struct layouts and BTF it needs
	StageFinders     = "finders"       // every finder of the chain, through Chain().All
)

// Stages returns the steps of decoding every symbol the session's chain
// holds, each after those it needs: the translation, kallsyms, the
// modules, then the whole chain (the ftrace, BPF and kprobes sources and
// the extra files). The lazily loaded sources load in this order whatever
// a caller asks first; a caller that accounts for each step (kdump-syms
// extract records the pages each reads) runs them in turn.
//
// Each step returns the error of what it loads: the modules step that of
// Modules, the finders step those of every finder that could not answer,
// joined.
func (s *Session) Stages() []Stage {
	return []Stage{
		{StageTranslation, func() error { _, err := s.Kernel(); return err }},
		{StageKallsyms, func() error { _, err := s.Kallsyms(); return err }},
		{StageModules, func() error { _, err := s.Modules(); return err }},
		{StageFinders, func() error {
			var errs []error
			for _, err := range s.chain.All() {
				if err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		}},
	}
}
