package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseAddrArg: any argument of addr is an address, a symbolic
// location with a name and an offset, or a usage error that quotes it.
func FuzzParseAddrArg(f *testing.F) {
	for _, s := range []string{"ffffffff8110a2b4", "0x1", "zzz", "0x", "10000000000000001", "-1",
		"vfs_write+0xe1", "xfs_file_write_iter+0x5e/0x120 [xfs]", "xfs:a+1", "a+0x1 [b", ":+", "+0x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, a string) {
		q, err := parseAddrArg(a)
		if err != nil {
			// A usage error is printed for the user as it is: its text
			// quoting the argument is the CLI's contract.
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), strconv.Quote(a)) {
				t.Fatalf("%q: error %v is not a usage error quoting the argument", a, err)
			}
			return
		}
		if q.symbol && (q.name == "" || strings.ContainsAny(q.name, " \t[]/+")) {
			t.Fatalf("%q: symbolic with name %q", a, q.name)
		}
		if !q.symbol {
			if v, ok := parseHexArg(strings.TrimSpace(a)); !ok || v != q.addr {
				t.Fatalf("%q: address %#x does not read back", a, q.addr)
			}
		}
	})
}
