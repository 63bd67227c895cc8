package errshape

import (
	"errors"
	"fmt"
	"testing"
)

type fault struct {
	Addr uint64
	Err  error
}

func (e *fault) Error() string { return fmt.Sprintf("memory at %#x: %v", e.Addr, e.Err) }
func (e *fault) Unwrap() error { return e.Err }

type formatError struct{ Off int64 }

func (e *formatError) Error() string { return fmt.Sprintf("at offset %#x: bad", e.Off) }

type LineError struct{ Num int }

func (e *LineError) Error() string { return fmt.Sprintf("line %d: bad", e.Num) }

func TestNames(t *testing.T) {
	err := errors.Join(fmt.Errorf("ctx: %w", &fault{Addr: 0x10, Err: &formatError{Off: 0x20}}), &LineError{Num: 3}, &formatError{Off: -1})
	got := fmt.Sprint(names(err))
	if want := "[0x10 0x20 line 3]"; got != want {
		t.Errorf("names = %s, want %s", got, want)
	}
	Require(t, fmt.Errorf("ctx: %w", &fault{Addr: 0x10, Err: &formatError{Off: 0x20}}), "ctx")
}
