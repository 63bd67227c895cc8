package printk

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func recsOf(lines ...string) []Record {
	var out []Record
	for _, l := range lines {
		out = append(out, Record{Text: l})
	}
	return out
}

func TestFindCrash(t *testing.T) {
	for _, tc := range []struct {
		name     string
		log      []Record
		start    int
		message  string
		panicked bool
		cpu, pid int
		comm     string
	}{
		{"sysrq arm64", recsOf(
			"Btrfs loaded",
			"sysrq: Trigger a crash",
			"Kernel panic - not syncing: sysrq triggered crash",
			"CPU: 0 PID: 1 Comm: init Not tainted 6.1.0-50-arm64 #1  Debian 6.1.176-1",
			"Call trace:",
			"---[ end Kernel panic - not syncing: sysrq triggered crash ]---",
		), 1, "Kernel panic - not syncing: sysrq triggered crash", true, 0, 1, "init"},
		{"x86 oops then panic, 6.12 header", recsOf(
			"WARNING: CPU: 1 PID: 7 at old.c:1 old+0x1/0x2", // an older warning, far before
			strings.Repeat("x", 1), "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
			"t", "u", "v", "w", "x", "y", "z", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
			"BUG: kernel NULL pointer dereference, address: 0000000000000000",
			"#PF: supervisor write access in kernel mode",
			"Oops: 0002 [#1] PREEMPT SMP NOPTI",
			"CPU: 3 UID: 0 PID: 412 Comm: insmod Tainted: G           OE      6.12.117+deb13-amd64 #1  Debian 6.12.117-1",
			"RIP: 0010:crash_init+0x5/0x1000 [crash]",
			"---[ end trace 0000000000000000 ]---",
			"Kernel panic - not syncing: Fatal exception",
			"---[ end Kernel panic - not syncing: Fatal exception ]---",
		), 43, "Kernel panic - not syncing: Fatal exception", true, 3, 412, "insmod"},
		{"arm64 oops", recsOf(
			"Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000",
			"Mem abort info:",
			"Internal error: Oops: 0000000096000045 [#1] SMP",
			"CPU: 1 PID: 99 Comm: sh Not tainted 6.1.0 #1",
			"Kernel panic - not syncing: Oops: Fatal exception",
		), 0, "Kernel panic - not syncing: Oops: Fatal exception", true, 1, 99, "sh"},
		{"oops without panic", recsOf(
			"booted",
			"------------[ cut here ]------------",
			"kernel BUG at mm/slub.c:1234!",
			"invalid opcode: 0000 [#1] SMP",
			"CPU: 0 PID: 5 Comm: kworker/0:1 Not tainted 5.10.0 #1",
		), 1, "------------[ cut here ]------------", false, 0, 5, "kworker/0:1"},
		{"panic without header", recsOf("Kernel panic - not syncing: VFS: Unable to mount root fs"),
			0, "Kernel panic - not syncing: VFS: Unable to mount root fs", true, -1, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := FindCrash(tc.log)
			require.True(t, ok)
			assert.Equal(t, tc.start, c.Start)
			assert.Equal(t, len(tc.log), c.End)
			assert.Equal(t, tc.message, c.Message)
			assert.Equal(t, tc.panicked, c.Panicked)
			assert.Equal(t, tc.cpu, c.CPU)
			assert.Equal(t, tc.pid, c.PID)
			assert.Equal(t, tc.comm, c.Comm)
		})
	}
	_, ok := FindCrash(recsOf("Linux version 6.1.0", "all quiet"))
	assert.False(t, ok)
	_, ok = FindCrash(nil)
	assert.False(t, ok)
}
