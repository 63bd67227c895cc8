package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/symtest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/oops"
	"github.com/kdumpsyms/kdumpsyms/printk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func renderLog(t *testing.T, lw func(*bufio.Writer) logWriter, entries []printk.Entry) string {
	t.Helper()
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	l := lw(w)
	for _, e := range entries {
		require.NoError(t, l.write(e))
	}
	require.NoError(t, l.end())
	require.NoError(t, w.Flush())
	return b.String()
}

func TestDmesgText(t *testing.T) {
	recs := []printk.Entry{
		{Record: printk.Record{TimeNS: 0, Text: "Linux version 6.1.0"}},
		{Record: printk.Record{TimeNS: 1_234_567_890, Text: "first\nsecond"}},
		{Record: printk.Record{TimeNS: 12345_000_001_000, Text: ""}},
		// 3.5–4.8 continuation fragments.
		{Record: printk.Record{TimeNS: 2e9, Text: "CPU:", NoNewline: true}},
		{Record: printk.Record{TimeNS: 2e9, Text: " sse", NoPrefix: true, NoNewline: true}},
		{Record: printk.Record{TimeNS: 2e9, Text: " avx", NoPrefix: true}},
		{Gap: &printk.Gap{FirstSeq: 7, SeqKnown: true, Count: 2, Err: memory.ErrNotSaved}},
		{Record: printk.Record{TimeNS: 3e9, Text: "cut", NoNewline: true}},
		{Record: printk.Record{TimeNS: 3e9, Text: "new line"}},
		{Record: printk.Record{TimeNS: 4e9, Text: "last fragment", NoNewline: true}},
	}
	got := renderLog(t, func(w *bufio.Writer) logWriter { return &textLog{w: w} }, recs)
	assert.Equal(t, `[    0.000000] Linux version 6.1.0
[    1.234567] first
[    1.234567] second
[12345.000001] 
[    2.000000] CPU: sse avx
** 2 records from seq 7 lost: page not present in dump **
[    3.000000] cut
[    3.000000] new line
[    4.000000] last fragment
`, got)
}

func TestDmesgSymbolize(t *testing.T) {
	sym := logSymbolizer(oops.New(oops.Options{Resolver: symtest.SmallKernelChain(t), Digits: 16, MinAddr: 1 << 63}))
	recs := []printk.Entry{{Record: printk.Record{TimeNS: 5e8, Text: "RIP: 0010:ffffffff8110a2b4\n [<ffffffff8110a2b4>] x"}}}
	got := renderLog(t, func(w *bufio.Writer) logWriter { return &textLog{w: w, sym: sym} }, recs)
	assert.Equal(t, "[    0.500000] RIP: 0010:ffffffff8110a2b4 do_sys_open+0x14/0x60\n[    0.500000]  [<ffffffff8110a2b4>] do_sys_open+0x14/0x60 x\n", got)
	got = renderLog(t, func(w *bufio.Writer) logWriter { return &jsonLog{w: w, sym: sym} }, recs)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(got), &m))
	assert.Equal(t, "RIP: 0010:ffffffff8110a2b4 do_sys_open+0x14/0x60\n [<ffffffff8110a2b4>] do_sys_open+0x14/0x60 x", m["text"])
}

func TestDmesgJSON(t *testing.T) {
	recs := []printk.Entry{
		{Record: printk.Record{Seq: 4, SeqKnown: true, TimeNS: 1_234_567_890, Level: 3, Facility: 0, CallerID: 0x80000001, HasCaller: true,
			Text: "usb 1-1: \"x\"", Dict: "SUBSYSTEM=usb\nDEVICE=c189:1"}},
		{Gap: &printk.Gap{FirstSeq: 5, SeqKnown: true, Count: 3, Addr: 0xffff800000001000, Err: errors.New("boom")}},
		{Record: printk.Record{TimeNS: 2e9, Level: 6, Text: "no seq"}},
	}
	got := renderLog(t, func(w *bufio.Writer) logWriter { return &jsonLog{w: w} }, recs)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, `{"seq":4,"ts":1.234567,"ts_nsec":1234567890,"level":3,"facility":0,"caller":"C1","text":"usb 1-1: \"x\"","dict":"SUBSYSTEM=usb\nDEVICE=c189:1"}`, lines[0])
	assert.Equal(t, `{"gap":{"first_seq":5,"count":3,"addr":"0xffff800000001000","error":"boom"}}`, lines[1])
	assert.Equal(t, `{"ts":2.000000,"ts_nsec":2000000000,"level":6,"facility":0,"text":"no seq"}`, lines[2])
}

// TestDmesgCorpus: on a dump of every corpus guest (every dump with
// testutil.Thorough; see guestSample), where it holds the log, the guest's
// captured dmesg appears line for line, in order, followed by the panic as
// the console printed it.
func TestDmesgCorpus(t *testing.T) {
	ran := 0
	for _, g := range testutil.Corpus(t) {
		dmesg, err := os.ReadFile(filepath.Join(g.Dir, "dmesg"))
		if err != nil {
			continue // a guest captured before dmesg was
		}
		console, err := os.ReadFile(filepath.Join(g.Dir, "console.log"))
		require.NoError(t, err)
		for _, cd := range guestSample(g) {
			paths, f := cd.Paths, cd.Format
			t.Run(g.Name+"/"+string(f), func(t *testing.T) {
				args := []string{"dmesg", paths[0]}
				for _, p := range paths[1:] {
					args = append(args, "--part", p)
				}
				code, stdout, stderr := runCLI(args...)
				if cd.Extract && code != exitOK && logNotSaved(t, paths) {
					t.Skipf("the committed extract predates the printk stage of extract: %s", strings.TrimSpace(stderr))
				}
				require.Equal(t, exitOK, code, stderr)
				ran++
				checkDmesg(t, stdout, string(dmesg), string(console))
			})
		}
	}
	if ran == 0 {
		t.Skip("no corpus dump with its captured dmesg holds the kernel log")
	}
}

func checkDmesg(t *testing.T, got, dmesg, console string) {
	t.Helper()
	gl := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	wl := strings.Split(strings.TrimSuffix(dmesg, "\n"), "\n")
	require.GreaterOrEqual(t, len(gl), len(wl))
	for i, w := range wl {
		require.Equal(t, w, gl[i], "line %d", i+1)
	}
	// What follows is the panic: each line in the console log, in order.
	rest := gl[len(wl):]
	require.NotEmpty(t, rest, "nothing after the captured dmesg")
	assert.Contains(t, strings.Join(rest, "\n"), "Kernel panic - not syncing")
	cl := strings.Split(strings.ReplaceAll(console, "\r", ""), "\n")
	j := 0
	for _, line := range rest {
		for j < len(cl) && cl[j] != line {
			j++
		}
		require.Less(t, j, len(cl), "line %q of the log is not in the console log (in order)", line)
		j++
	}
}

// logNotSaved reports whether the printk log of the dump at paths fails to
// load because pages it needs are not in the dump, asked of the library
// (the class is typed there; stderr is for people).
func logNotSaved(t *testing.T, paths []string) bool {
	t.Helper()
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths...)
	if err != nil {
		return false
	}
	defer s.Close()
	_, err = s.Log()
	return errors.Is(err, memory.ErrNotSaved)
}
