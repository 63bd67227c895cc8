package memory

import (
	"errors"
	"slices"
)

// Remedy is something a caller can supply to get past a failure for want
// of information the dump does not hold. Library errors carry remedies as
// these values instead of naming a program's flags; a program renders each
// in its own terms (kdump-syms: --btf, --vmcoreinfo, --arch, --part).
type Remedy uint8

const (
	// SupplyLayouts: the kernel's struct layouts, as its BTF or a layout
	// table (kdumpsyms.Options.Layout).
	SupplyLayouts Remedy = iota + 1
	// SupplyVMCOREINFO: the VMCOREINFO text of the dump's boot
	// (vmcore.Options.VMCOREINFO).
	SupplyVMCOREINFO
	// SupplyArch: the dump's architecture (vmcore.Options.Arch).
	SupplyArch
	// SupplySplitParts: the other files of a split dump.
	SupplySplitParts
)

var remedyNames = [...]string{"", "the kernel's BTF or a layout table", "the VMCOREINFO text of the dump's boot", "the architecture", "the other parts of the split dump"}

// String says what the remedy supplies.
func (r Remedy) String() string {
	if int(r) < len(remedyNames) && r != 0 {
		return remedyNames[r]
	}
	return "Remedy(?)"
}

// WithRemedy returns err carrying remedies: its message and its matches
// (errors.Is, errors.As) are err's.
func WithRemedy(err error, r ...Remedy) error { return &remedied{err, r} }

type remedied struct {
	err      error
	remedies []Remedy
}

func (e *remedied) Error() string { return e.err.Error() }
func (e *remedied) Unwrap() error { return e.err }

// Remedies returns the remedies carried anywhere in err's chain (through
// wrapping and errors.Join), each once, in the order found.
func Remedies(err error) []Remedy {
	var out []Remedy
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			if r, ok := e.(*remedied); ok {
				for _, x := range r.remedies {
					if !slices.Contains(out, x) {
						out = append(out, x)
					}
				}
			}
			if j, ok := e.(interface{ Unwrap() []error }); ok {
				for _, s := range j.Unwrap() {
					walk(s)
				}
				return
			}
			e = errors.Unwrap(e)
		}
	}
	walk(err)
	return out
}
