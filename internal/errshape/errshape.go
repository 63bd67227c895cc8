// Package errshape checks the shape of an error message in tests: one
// line per root cause, naming where. It imports nothing of this module, so
// that every package's own tests can use it.
package errshape

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Require fails the test unless err is non-nil and its message is one line
// that names where: the hex address (field Addr uint64, when not 0) and
// the hex file offset (field Off int64, when not negative) of every error
// in its tree that has one, the line number ("line N") of every
// *LineError (field Num int), and each of the strings in where. It
// returns the message.
//
// The fields are found by name, so the check holds for every package's
// typed errors (*memory.FaultError, *FormatError, *ModuleError, ...)
// without importing them.
func Require(tb testing.TB, err error, where ...string) string {
	tb.Helper()
	if err == nil {
		tb.Fatal("errshape: no error")
		return ""
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		tb.Errorf("errshape: message is not one line: %q", msg)
	}
	for _, w := range append(names(err), where...) {
		if !strings.Contains(msg, w) {
			tb.Errorf("errshape: message does not name %q: %q", w, msg)
		}
	}
	return msg
}

// names returns what the message of every typed error in err's tree must
// contain.
func names(err error) []string {
	var out []string
	walk(err, func(e error) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return
		}
		s := v.Elem()
		if f := s.FieldByName("Addr"); f.IsValid() && f.Kind() == reflect.Uint64 && f.Uint() != 0 {
			out = append(out, fmt.Sprintf("%#x", f.Uint()))
		}
		if f := s.FieldByName("Off"); f.IsValid() && f.Kind() == reflect.Int64 && f.Int() >= 0 {
			out = append(out, fmt.Sprintf("%#x", f.Int()))
		}
		if s.Type().Name() == "LineError" {
			if f := s.FieldByName("Num"); f.IsValid() && f.Kind() == reflect.Int {
				out = append(out, fmt.Sprintf("line %d", f.Int()))
			}
		}
	})
	return out
}

// walk calls fn for err and every error it wraps, depth first.
func walk(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, fn)
		}
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), fn)
	}
}
