package vmcore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// The sentinels carry no package prefix: Open and OpenReaderAt, which
// return them, prefix "vmcore:" and the path.

// ErrUnrecognizedFormat means no opener recognised the file: it is neither
// an ELF core nor a kdump-compressed file, plain or wrapped in xz, zstd or
// gzip.
var ErrUnrecognizedFormat = errors.New("unrecognized dump format")

// ErrTooLarge means a compressed wrapper decompressed to more than
// Options.MaxDecompressedSize.
var ErrTooLarge = errors.New("decompressed dump exceeds size limit")

// ErrSingleFile means several files were given for a dump whose format
// is one file: only a kdump-compressed dump is split into several
// (makedumpfile --split).
var ErrSingleFile = errors.New("only a kdump-compressed dump is split into several files")

// Why a derivation of VMCOREINFO from a memory image that holds no note
// failed (Dump.DeriveErr, docs/formats.md §3.7): each architecture's cause
// is a *DeriveError that matches one of these.
var (
	// ErrNoBanner means the memory read holds no "Linux version " banner:
	// the image is not of a Linux kernel, or the banner lies beyond
	// Options.ScanLimit.
	ErrNoBanner = errors.New(`no "Linux version " banner in saved memory`)
	// ErrNoPageTable means no page of the memory read is the kernel's
	// top-level page table: none looks like one, none maps a banner copy
	// and itself in the kernel image, or the one that does fails a later
	// check (the text map is not linear with the banner; arm64: the
	// linear map does not map the banner).
	ErrNoPageTable = errors.New("no kernel top-level page table")
	// ErrAmbiguous means the memory read does not name one kernel: several
	// top-level tables pass every check, candidates map the banner
	// differently, or the kernel image holds the banners of two releases.
	ErrAmbiguous = errors.New("ambiguous kernel top-level page table")
	// ErrTooManyTables means the memory holds more candidate page tables
	// than any kernel has (DeriveError.MaxTables): the derivation stops
	// rather than read them all.
	ErrTooManyTables = errors.New("too many candidate page tables")
)

// DeriveError reports why one architecture's derivation of VMCOREINFO
// failed. It matches Kind (ErrNoBanner, ErrNoPageTable, ErrAmbiguous or
// ErrTooManyTables) with errors.Is.
//
// Tables and Banners are the physical addresses of the top-level page
// tables and "Linux version " banner copies the failure concerns, each
// named in the message (up to 8 tables). Examined is how many candidate
// top-level tables were examined, where the message says; MaxTables the
// bound that was exceeded (ErrTooManyTables); Scanned the most memory the
// scan read, in bytes (ErrNoBanner). Err is the first page table that
// could not be read on the way (wrapping a *memory.FaultError), or nil.
type DeriveError struct {
	Kind      error
	Tables    []uint64
	Banners   []uint64
	Examined  int
	MaxTables int
	Scanned   uint64
	Err       error
	msg       string
}

func (e *DeriveError) Error() string {
	if e.Err == nil {
		return e.msg
	}
	return e.msg + "; first unreadable table: " + e.Err.Error()
}

// Is reports whether target is e.Kind.
func (e *DeriveError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the first page table that could not be read, or nil.
func (e *DeriveError) Unwrap() error { return e.Err }

// deriveErr is the *DeriveError of kind with the message format, args;
// the caller sets the other fields.
func deriveErr(kind error, format string, args ...any) *DeriveError {
	return &DeriveError{Kind: kind, msg: fmt.Sprintf(format, args...)}
}

// InfoMismatchError reports a VMCOREINFO text the caller gave
// (Options.VMCOREINFO) that contradicts the dump: another kernel, or
// another boot of it. It matches memory.ErrCorrupt: the input is bad.
type InfoMismatchError struct {
	// Release is the text's OSRELEASE ("" when it has none).
	Release string
	// Problems says what does not hold, one item each.
	Problems []string
}

func (e *InfoMismatchError) Error() string {
	rel := ""
	if e.Release != "" {
		rel = " (OSRELEASE " + e.Release + ")"
	}
	return "the VMCOREINFO given" + rel + " is not this dump's: " + strings.Join(e.Problems, "; ")
}

// Is reports memory.ErrCorrupt.
func (e *InfoMismatchError) Is(target error) bool { return target == memory.ErrCorrupt }
