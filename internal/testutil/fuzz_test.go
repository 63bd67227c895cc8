package testutil

import (
	"bytes"
	"testing"
)

func TestFuzzPatch(t *testing.T) {
	base := []byte("0123456789")
	for _, c := range []struct {
		edits []byte
		want  string
	}{
		{nil, "0123456789"},
		{[]byte{0}, "0123456789"},
		{[]byte{0, 3}, "0123456"},
		{[]byte{0, 11}, "0123456789"}, // 11 % 11 = 0
		{[]byte{0, 0, 0, 2, 2, 'a', 'b'}, "01ab456789"},
		{[]byte{0, 0, 0, 8, 5, 'x', 'y', 'z'}, "01234567xy"}, // clipped at the end
		{[]byte{0, 0, 0, 12, 1, 'q', 0, 0}, "01q3456789"},    // offset 12 % 10; a short record ends it
		{[]byte{0, 10}, ""},
	} {
		got := FuzzPatch(base, c.edits)
		if string(got) != c.want {
			t.Errorf("FuzzPatch(%q) = %q, want %q", c.edits, got, c.want)
		}
	}
	if !bytes.Equal(base, []byte("0123456789")) {
		t.Error("base modified")
	}
}
