package oops

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/symtest"
)

// symbolText is what the oops reader may add: a symbol after an address,
// or with --addresses an address before a symbol.
var (
	symbolText  = regexp.MustCompile(`^ [A-Za-z_.$][A-Za-z0-9_.$]*\+0x[0-9a-f]+/0x[0-9a-f]+( \[[A-Za-z0-9_.$-]+\])?$`)
	addressText = regexp.MustCompile(`^\[<[0-9a-f]{16}>\] $`)
	// flagText is what a Check adds at the end of a line it disagrees with.
	flagText = regexp.MustCompile(`^  \[kdump-syms: [^\r\n]*\]$`)
)

// FuzzOops checks the oops reader's contract on any text: no panic, one
// output line per input line, and the output is the input with nothing but
// symbols (or, with --addresses, addresses; with a Check, a flag at the
// end of a line) inserted.
func FuzzOops(f *testing.F) {
	for _, s := range []string{
		"Call Trace:\n [<ffffffff8110a2b4>] ? do_sys_open+0x14/0x60\n [<ffffffff8110a300>]\n",
		"RIP: 0010:[<ffffffff8110a2b4>]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n",
		"Call Trace:\n <TASK>\n ? do_sys_open+0x14/0x60\n xfs_file_write_iter+0x5e/0xb00 [xfs]\n ? 0xffffffffc0a1b2c4\n </TASK>\n",
		"RAX: 0000000000000000 RBX: ffff888003a8c000 RCX: ffffffff8110a2a0\nCode: 48 89 e5 <0f> 0b\n",
		"pc : [<ffffffff8110a2b4>] lr : [<ffffffff8110a300>] pstate: 60000145\n",
		"[  123.456789][ T1234]  ? 0xffffffff8110a300\r\nDec 01 11:22:33 host kernel: dup_name+0x10/0x80 [xfs 0123abcd]",
		"[<[<0x>]>] +0x/0x [ ] ffffffffffffffffff 0xffffffffffffffff0 _+0x1/0x",
		"CPU: 0 PID: 1 Comm: sh Not tainted 6.12.0-1-amd64 #1 Debian\r\nKernel Offset: 0x2000 from 0xffffffff81000000\n",
		" [<ffffffff8110a2b4>] vfs_write+0xe1/0x440\n nosuch+0x1/0x2 [xfs]\n",
	} {
		f.Add(s, false, false)
		f.Add(s, true, true)
	}
	chain := symtest.SmallKernelChain(f)
	f.Fuzz(func(t *testing.T, in string, addresses, check bool) {
		o := &Annotator{r: chain, digits: 16, minAddr: 1 << 63, addresses: addresses, format: newTestOops(t, false).format, returnAddrs: true}
		if check {
			o.check = &Check{Release: "6.1.0-1-amd64", KASLR: 0x1000, HasKASLR: true}
		}
		lines := strings.SplitAfter(in, "\n")
		for _, line := range lines {
			if line == "" {
				continue
			}
			ins := o.annotate(line)
			last := 0
			var b strings.Builder
			for _, x := range ins {
				if x.at < last || x.at > len(line) {
					t.Fatalf("insertion at %d out of order (after %d) in %q", x.at, last, line)
				}
				if !symbolText.MatchString(x.text) && !(addresses && addressText.MatchString(x.text)) && !(check && flagText.MatchString(x.text)) {
					t.Fatalf("inserted %q, not a symbol, into %q", x.text, line)
				}
				b.WriteString(line[last:x.at])
				b.WriteString(x.text)
				last = x.at
			}
			b.WriteString(line[last:])
			out := b.String()
			if strings.Count(out, "\n") != strings.Count(line, "\n") {
				t.Fatalf("%q became %q: line count changed", line, out)
			}
		}
	})
}
