package memory

// The error vocabulary every package of kdump-syms shares: corruption
// matches ErrCorrupt, absence matches ErrNotSaved (a page not in the dump)
// or vmcoreinfo.ErrMissingInfo (information the dump does not carry).
// Each package keeps sentinels with its own message (see Classed) that
// errors.Is matches with these too.
//
// ErrCorrupt and ErrNotSaved also name their class through an ErrorClass
// method, so that packages which import nothing of this module
// (symfinder, vmcoreinfo) can match them without importing memory: their
// errors' Is method accepts any target whose ErrorClass is theirs.
const (
	ClassCorrupt  = "corrupt"   // ErrorClass of ErrCorrupt
	ClassNotSaved = "not saved" // ErrorClass of ErrNotSaved
)

// classError is the type of ErrCorrupt and ErrNotSaved.
type classError struct{ msg, class string }

func (e *classError) Error() string { return e.msg }

// ErrorClass names the error's class: ClassCorrupt or ClassNotSaved.
func (e *classError) ErrorClass() string { return e.class }

// Classed returns a sentinel error with message msg that errors.Is also
// matches with class: a package's own ErrCorrupt is
// Classed("corrupt module data", memory.ErrCorrupt).
func Classed(msg string, class error) error { return &classed{msg, class} }

type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string { return e.msg }

// Is reports whether target is the sentinel's class.
func (e *classed) Is(target error) bool { return target == e.class }
