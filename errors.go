package kdumpsyms

// NeedsError reports a symbol source that could not run because something
// it needs failed first: the module walk and the ftrace, BPF and kprobes
// readers need the kernel's symbols ("kallsyms") and the struct layouts;
// kallsyms needs address translation; the modules' ORC tables need BTF. Err is the other's failure, the same
// error value for every source that needs it, so a caller can report the
// root cause once and name the sources it stopped.
type NeedsError struct {
	Source string // the source that did not run, e.g. "modules"
	Needs  string // what it needed, e.g. "kallsyms", "struct layouts"
	Err    error  // why that is not available
}

func (e *NeedsError) Error() string {
	return "kdumpsyms: " + e.Source + " needs " + e.Needs + ": " + e.Err.Error()
}

// Unwrap returns the failure of what the source needed.
func (e *NeedsError) Unwrap() error { return e.Err }

// What the sources of a Session need, as NeedsError.Needs names them.
const (
	NeedTranslation = "translation"    // kernel virtual address translation
	NeedLayouts     = "struct layouts" // BTF in the dump, or Options.Layout
	// NeedBTF: layouts that inference does not find (struct module's
	// arch, struct mod_arch_specific), from the dump's BTF or an
	// Options.Layout that has them.
	NeedBTF = "BTF"
)

// SourceModuleORC is NeedsError.Source for the modules' ORC tables
// (ORCTables' ModulesErr).
const SourceModuleORC = "module unwinding"
