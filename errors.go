package kdumpsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

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

// FileMismatchError reports a symbol file the caller gave (Options.VMLinux,
// SystemMap, KallsymsFile) that the dump's own kallsyms contradicts: a
// file of another build, or a /proc/kallsyms of another boot. It matches
// memory.ErrCorrupt: the input is bad.
type FileMismatchError struct {
	Finder, Path string
	// The first disagreement: Name is at FileAddr in the file (after the
	// KASLR shift) and at DumpAddr in the dump.
	Name               string
	FileAddr, DumpAddr uint64
	// Disagree of Sampled global functions found in both disagree.
	Disagree, Sampled int
	// OneShift reports that every sampled function is off by the same
	// Shift (dump minus file): the same build at another KASLR offset,
	// for instance a System.map of a kernel whose dump gives no offset.
	Shift    uint64
	OneShift bool
}

func (e *FileMismatchError) Error() string {
	msg := fmt.Sprintf("kdumpsyms: %s does not match this dump: %s is at %#x in it, at %#x in the dump's kallsyms (%d of %d sampled functions disagree",
		e.Path, e.Name, e.FileAddr, e.DumpAddr, e.Disagree, e.Sampled)
	if e.OneShift {
		msg += fmt.Sprintf(", every one by %#x: the same build at another KASLR offset?", e.Shift)
	}
	return msg + ")"
}

// Is reports memory.ErrCorrupt.
func (e *FileMismatchError) Is(target error) bool { return target == memory.ErrCorrupt }
