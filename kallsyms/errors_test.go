package kallsyms

import (
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
)

// TestCandidatesError: many failed candidates make one line that counts
// them and shows the nearest miss (the first failed check, not a read),
// while errors.Is/As still see every candidate.
func TestCandidatesError(t *testing.T) {
	fault := &memory.FaultError{Addr: 0x2000, Op: "read", Err: memory.ErrNotSaved}
	bad := corrupt(0x1000, 7, "kallsyms_markers[0] is not 0")
	e := candidates(ErrNotFound, 12, []error{fault, bad, corrupt(0x3000, 1, "other")}, "tables not found in [%#x, %#x)", 0, 0x4000)
	msg := e.Error()
	assert.NotContains(t, msg, "\n")
	assert.Equal(t, "kallsyms: tables not found in [0x0, 0x4000): 12 candidates tried, nearest miss: "+bad.Error(), msg)
	assert.ErrorIs(t, e, ErrNotFound)
	assert.ErrorIs(t, e, memory.ErrCorrupt)
	assert.ErrorIs(t, e, memory.ErrNotSaved)
	var fe *FormatError
	assert.True(t, errors.As(e, &fe))
	assert.Len(t, e.Candidates(), 3)
	one := candidates(nil, 1, []error{bad}, "no address table validates")
	assert.Equal(t, "kallsyms: no address table validates: "+bad.Error(), one.Error())
}
