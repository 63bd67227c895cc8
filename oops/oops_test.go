package oops

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kdumpsyms/kdumpsyms/internal/symtest"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestOops(t testing.TB, addresses bool) *Annotator {
	return &Annotator{r: symtest.SmallKernelChain(t), digits: 16, minAddr: 1 << 63, addresses: addresses, format: symfinder.Symbol.Format, returnAddrs: true}
}

// TestOopsForms symbolizes every frame form kernels have printed, x86_64
// and arm64: frames without a symbol get one, frames with one keep it
// and never get a second, the "?" stays where the kernel put it, return
// addresses are looked up at addr-1, register values that lie in no
// symbol and Code: lines are left alone.
func TestOopsForms(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		addresses      bool
	}{
		{name: "3.x frame without symbol", in: "Call Trace:\n [<ffffffff8110a2b4>]\n",
			want: "Call Trace:\n [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n"},
		{name: "3.x frame with symbol", in: "Call Trace:\n [<ffffffff8110a2b4>] ? do_sys_open+0x14/0x60\n [<ffffffffc0a1b2c4>] xfs_foo+0x14/0x150 [xfs]\n",
			want: "Call Trace:\n [<ffffffff8110a2b4>] ? do_sys_open+0x14/0x60\n [<ffffffffc0a1b2c4>] xfs_foo+0x14/0x150 [xfs]\n"},
		{name: "return address at a function's end", in: " [<ffffffff8110a300>]\n",
			want: " [<ffffffff8110a300>] do_sys_open+0x60/0x60\n"},
		{name: "3.x RIP", in: "RIP: 0010:[<ffffffff8110a2b4>]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n",
			want: "RIP: 0010:[<ffffffff8110a2b4>]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n"},
		{name: "RIP is exact", in: "RIP: 0010:ffffffff8110a300\n", want: "RIP: 0010:ffffffff8110a300 next_fn+0x0/0x100\n"},
		{name: "4.x+ RIP symbolic", in: "RIP: 0010:do_sys_open+0x14/0x60\n", want: "RIP: 0010:do_sys_open+0x14/0x60\n"},
		{name: "modern frames", in: "Call Trace:\n <TASK>\n ? do_sys_open+0x14/0x60\n xfs_file_write_iter+0x5e/0x100 [xfs]\n </TASK>\n",
			want: "Call Trace:\n <TASK>\n ? do_sys_open+0x14/0x60\n xfs_file_write_iter+0x5e/0x100 [xfs]\n </TASK>\n"},
		{name: "modern frames with --addresses", addresses: true,
			in:   "Call Trace:\n <TASK>\n ? do_sys_open+0x14/0x60\n xfs_file_write_iter+0x5e/0xb00 [xfs]\n vfs_write+0xe1/0x200\n RIP: 0010:ksys_write+0x5/0x100\n",
			want: "Call Trace:\n <TASK>\n ? [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n [<ffffffffc0a1b55e>] xfs_file_write_iter+0x5e/0xb00 [xfs]\n [<ffffffff8110a4e1>] vfs_write+0xe1/0x200\n RIP: 0010:[<ffffffff8110a605>] ksys_write+0x5/0x100\n"},
		{name: "--addresses leaves a frame that has its address", addresses: true,
			in:   " [<ffffffff8110a2b4>] ? do_sys_open+0x14/0x60\nRIP: 0010:[<ffffffff8110a2b4>]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n",
			want: " [<ffffffff8110a2b4>] ? do_sys_open+0x14/0x60\nRIP: 0010:[<ffffffff8110a2b4>]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n"},
		{name: "ambiguous name needs its size", addresses: true,
			in:   " dup_name+0x10/0x80\n dup_name+0x10\n dup_name+0x10/0x100\n",
			want: " [<ffffffff8110a910>] dup_name+0x10/0x80\n dup_name+0x10\n [<ffffffff8110a810>] dup_name+0x10/0x100\n"},
		{name: "bare address frame", in: "Call Trace:\n ? 0xffffffffc0a1b2c4\n 0xffffffffc0a1b400\n",
			want: "Call Trace:\n ? 0xffffffffc0a1b2c4 xfs_foo+0x14/0x150 [xfs]\n 0xffffffffc0a1b400 xfs_foo+0x150/0x150 [xfs]\n"},
		{name: "registers", in: "RAX: 0000000000000000 RBX: ffff888003a8c000 RCX: ffffffff8110a2a0\n",
			want: "RAX: 0000000000000000 RBX: ffff888003a8c000 RCX: ffffffff8110a2a0 do_sys_open+0x0/0x60\n"},
		{name: "Code line", in: "Code: 48 89 e5 ffffffff8110a2a0 <0f> 0b\n", want: "Code: 48 89 e5 ffffffff8110a2a0 <0f> 0b\n"},
		{name: "dmesg prefix", in: "[  123.456789] Call Trace:\n[  123.456790]  [<ffffffff8110a2b4>]\n",
			want: "[  123.456789] Call Trace:\n[  123.456790]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n"},
		{name: "dmesg caller id", in: "[  123.456789][ T1234] Call Trace:\n[  123.456790][ T1234]  ? 0xffffffff8110a300\n",
			want: "[  123.456789][ T1234] Call Trace:\n[  123.456790][ T1234]  ? 0xffffffff8110a300 do_sys_open+0x60/0x60\n"},
		{name: "journal prefix", in: "Dec 01 11:22:33 host kernel: Call Trace:\nDec 01 11:22:33 host kernel:  [<ffffffff8110a2b4>]\n",
			want: "Dec 01 11:22:33 host kernel: Call Trace:\nDec 01 11:22:33 host kernel:  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n"},
		{name: "arm64 4.x pc and lr are exact", in: "pc : [<ffffffff8110a2b4>] lr : [<ffffffff8110a300>] pstate: 60000145\n",
			want: "pc : [<ffffffff8110a2b4>] do_sys_open+0x14/0x60 lr : [<ffffffff8110a300>] next_fn+0x0/0x100 pstate: 60000145\n"},
		{name: "arm64 symbolic", in: "pc : do_sys_open+0x14/0x60\nlr : next_fn+0x0/0x100\nCall trace:\n do_sys_open+0x14/0x60\n",
			want: "pc : do_sys_open+0x14/0x60\nlr : next_fn+0x0/0x100\nCall trace:\n do_sys_open+0x14/0x60\n"},
		{name: "arm frames keep their symbols", in: "[<ffffffff8110a2b4>] (do_sys_open) from [<ffffffff8110a300>] (next_fn+0x0/0x100)\n",
			want: "[<ffffffff8110a2b4>] (do_sys_open) from [<ffffffff8110a300>] (next_fn+0x0/0x100)\n"},
		{name: "powerpc frames keep their symbols", in: "Call Trace:\n[ffff888003a8c000] [ffffffff8110a2b4] do_sys_open+0x14/0x60 (unreliable)\n",
			want: "Call Trace:\n[ffff888003a8c000] [ffffffff8110a2b4] do_sys_open+0x14/0x60 (unreliable)\n"},
		{name: "not addresses", in: "deadbeefffffffff81 xffffffff8110a2b4 ffffffff8110a2b4z 0x7ffd1234\n",
			want: "deadbeefffffffff81 xffffffff8110a2b4 ffffffff8110a2b4z 0x7ffd1234\n"},
		{name: "no newline at the end", in: "ffffffff8110a300", want: "ffffffff8110a300 next_fn+0x0/0x100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			require.NoError(t, newTestOops(t, tc.addresses).Stream(strings.NewReader(tc.in), &out))
			assert.Equal(t, tc.want, out.String())
		})
	}
}

// TestOopsLineBuffered feeds a pipe one line at a time and reads each
// answer before writing the next line, as "dmesg -w |" or a coprocess
// would: output held back would block here.
func TestOopsLineBuffered(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	o := newTestOops(t, false)
	done := make(chan error, 1)
	go func() { done <- o.Stream(inR, outW); outW.Close() }()
	br := bufio.NewReader(outR)
	for _, tc := range []struct{ in, want string }{
		{"RIP: 0010:ffffffff8110a300\n", "RIP: 0010:ffffffff8110a300 next_fn+0x0/0x100\n"},
		{"hello\n", "hello\n"},
		{" [<ffffffff8110a2b4>]\n", " [<ffffffff8110a2b4>] do_sys_open+0x14/0x60\n"},
	} {
		go func() { _, _ = inW.Write([]byte(tc.in)) }()
		got := make(chan string, 1)
		go func() { l, _ := br.ReadString('\n'); got <- l }()
		select {
		case l := <-got:
			assert.Equal(t, tc.want, l)
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %q while its input stays open", tc.in)
		}
	}
	inW.Close()
	require.NoError(t, <-done)
}

// BenchmarkOops symbolizes a 40-line oops of mixed forms.
func BenchmarkOops(b *testing.B) {
	var in strings.Builder
	in.WriteString("[  12.345678] RIP: 0010:do_sys_open+0x14/0x60\n[  12.345679] RAX: 0000000000000000 RBX: ffff888003a8c000 RCX: ffffffff8110a2a0\n[  12.345680] Call Trace:\n[  12.345681]  <TASK>\n")
	for i := range 16 {
		in.WriteString("[  12.345682]  ? do_sys_open+0x14/0x60\n")
		in.WriteString("[  12.345683]  [<ffffffff8110a2b4>] ? 0xffffffffc0a1b2c4\n")
		if i%4 == 0 {
			in.WriteString("[  12.345684]  xfs_file_write_iter+0x5e/0xb00 [xfs]\n")
		}
	}
	in.WriteString("[  12.345690]  </TASK>\n[  12.345691] Code: 48 89 e5 <0f> 0b\n")
	text := in.String()
	for _, addresses := range []bool{false, true} {
		name := "default"
		if addresses {
			name = "addresses"
		}
		b.Run(name, func(b *testing.B) {
			o := newTestOops(b, addresses)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if err := o.Stream(strings.NewReader(text), io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
