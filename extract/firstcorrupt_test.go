package extract

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// TestFirstCorrupt: of joined failures, the first corrupt one is what an
// extract reports, whole and on one line; a single error is itself.
func TestFirstCorrupt(t *testing.T) {
	absent := fmt.Errorf("symfinder: bpf: %w", memory.ErrNotSaved)
	bad1 := fmt.Errorf("symfinder: ftrace: %w", memory.ErrCorrupt)
	bad2 := fmt.Errorf("symfinder: kprobes: %w", memory.ErrCorrupt)
	if got := firstCorrupt(errors.Join(absent, bad1, bad2)); got != bad1 {
		t.Errorf("firstCorrupt(joined) = %v, want %v", got, bad1)
	}
	if got := firstCorrupt(errors.Join(absent, errors.Join(bad2, bad1))); got != bad2 {
		t.Errorf("firstCorrupt(nested) = %v, want %v", got, bad2)
	}
	if got := firstCorrupt(bad1); got != bad1 {
		t.Errorf("firstCorrupt(one) = %v, want it", got)
	}
}
