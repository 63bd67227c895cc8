package kdumpsyms

import (
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/bpfsyms"
	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
)

// TestErrorVocabulary: every package's corruption sentinel and format
// error matches memory.ErrCorrupt, every "absent" sentinel matches
// vmcoreinfo.ErrMissingInfo or memory.ErrNotSaved, and none matches the
// other class.
func TestErrorVocabulary(t *testing.T) {
	corrupt := map[string]error{
		"modsyms.ErrCorrupt":      modsyms.ErrCorrupt,
		"bpfsyms.ErrCorrupt":      bpfsyms.ErrCorrupt,
		"btflayout.ErrCorrupt":    btflayout.ErrCorrupt,
		"btflayout.InferError":    &btflayout.InferError{Problem: btflayout.Ambiguous, Msg: "x"},
		"vmcoreinfo.ErrCorrupt":   vmcoreinfo.ErrCorrupt,
		"vmcoreinfo.LineError":    &vmcoreinfo.LineError{Num: 3, Line: "PAGESIZE=x", Err: errors.New("bad")},
		"symfinder.ErrCorrupt":    symfinder.ErrCorrupt,
		"symfinder.LineError":     &symfinder.LineError{File: "System.map", Num: 1, Line: "x"},
		"kallsyms.ErrCorrupt":     kallsyms.ErrCorrupt,
		"kallsyms.FormatError":    &kallsyms.FormatError{Addr: 1, What: "x"},
		"diskdump.FormatError":    &diskdump.FormatError{Off: 1, What: "x"},
		"elfcore.FormatError":     &elfcore.FormatError{Off: 1, What: "x"},
		"memory.FaultError(corr)": memory.Fault(1, "physical", "", memory.ErrCorrupt),
	}
	for name, err := range corrupt {
		assert.ErrorIs(t, err, memory.ErrCorrupt, name)
		assert.NotErrorIs(t, err, memory.ErrNotSaved, name)
		assert.NotErrorIs(t, err, vmcoreinfo.ErrMissingInfo, name)
	}
	missing := map[string]error{
		"modsyms.ErrMissingInfo":  modsyms.ErrMissingInfo,
		"bpfsyms.ErrMissingInfo":  bpfsyms.ErrMissingInfo,
		"btflayout.ErrNoBTF":      btflayout.ErrNoBTF,
		"btflayout.ErrNotFound":   btflayout.ErrNotFound,
		"kallsyms.ErrMissingInfo": kallsyms.ErrMissingInfo,
	}
	for name, err := range missing {
		assert.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo, name)
		assert.NotErrorIs(t, err, memory.ErrCorrupt, name)
	}
	assert.ErrorIs(t, memory.Fault(1, "physical", "", memory.ErrNotSaved), memory.ErrNotSaved)
	assert.NotErrorIs(t, memory.ErrNotSaved, memory.ErrCorrupt)
}
