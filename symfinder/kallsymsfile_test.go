package symfinder

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kallsymsLine formats s as the kernel's s_show prints it.
func kallsymsLine(s Symbol, width int) string {
	line := fmt.Sprintf("%0*x %c %s", width, s.Addr, s.Kind, s.Name)
	if s.Module != "" {
		line += "\t[" + s.Module + "]"
	}
	return line
}

func parseKallsymsFile(t *testing.T, path string) (*SymbolFile, []byte) {
	t.Helper()
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := ParseKallsyms(bytes.NewReader(text), "kallsyms-file")
	require.NoError(t, err)
	return f, text
}

// TestParseKallsymsRoundTrip checks that All gives back the file line for
// line.
func TestParseKallsymsRoundTrip(t *testing.T) {
	f, text := parseKallsymsFile(t, "testdata/kallsyms.txt")
	var got []string
	for _, s := range collect(f, Query{Kind: All}) {
		got = append(got, kallsymsLine(s, 16))
	}
	assert.Equal(t, strings.Split(strings.TrimSuffix(string(text), "\n"), "\n"), got)
	assert.Equal(t, len(got), f.Len())
	var ixNames []string
	for _, ix := range f.Indexes() {
		ixNames = append(ixNames, ix.Name())
	}
	assert.Equal(t, []string{
		"kallsyms-file:absolute", "kallsyms-file", "kallsyms-file:xfs", "kallsyms-file:crc32c_intel",
		"kallsyms-file:bpf", "kallsyms-file:__builtin__ftrace", "kallsyms-file:__builtin__kprobes",
	}, ixNames)
}

func TestParseKallsymsLookup(t *testing.T) {
	f, _ := parseKallsymsFile(t, "testdata/kallsyms.txt")
	for _, tc := range []struct {
		addr uint64
		want string // Format(addr) of the first hit, "" for none
		all  []string
	}{
		{0xffffffff81000000, "_stext+0x0/0x70", []string{"_stext", "_text", "startup_64"}},
		{0xffffffff8100006f, "_stext+0x6f/0x70", nil},
		{0xffffffff81001041, "do_one_initcall+0x1/0xffefc0", nil},
		{0xffffffff82a00100, "bss_local+0x0/0xfff00", nil}, // up to _end (KALLSYMS_ALL)
		{0xffffffff82afffff, "bss_local+0xffeff/0xfff00", nil},
		{0xffffffff82b00000, "", nil}, // _end itself is past the kernel's range
		{0xffffffff80ffffff, "", nil}, // below _stext
		{0x0, "", nil},                // per-CPU offsets are no addresses the kernel resolves
		{0x1008, "", nil},
		{0x2d000, "", nil},
		{0x2d001, "", nil}, // not stretched to the kernel text
		{0xffffffffc0a00010, "xfs_init_fs_context+0x10/0x1000 [xfs]", nil},
		{0xffffffffc0a01fff, "xfs_fs_fill_super+0xfff/0x1000 [xfs]", nil},
		{0xffffffffc0a02000, "xfs_fs_type+0x0/0x0 [xfs]", nil},
		{0xffffffffc0a02001, "", nil}, // no size across modules
		{0xffffffffc0b00010, "crc32c_intel_init+0x10/0x80 [crc32c_intel]", nil},
		{0xffffffffc0c00010, "bpf_prog_6deef7357e7b4530_sd_fw_ingress+0x10/0x100 [bpf]", nil},
		{0xffffffffc0d00000, "ftrace_trampoline+0x0/0x0 [__builtin__ftrace]", nil},
		{0xdeadbeef, "", nil},
	} {
		t.Run(fmt.Sprintf("%#x", tc.addr), func(t *testing.T) {
			hits := collect(f, Query{Kind: ByAddr, Addr: tc.addr})
			if tc.want == "" {
				assert.Empty(t, hits)
				return
			}
			require.NotEmpty(t, hits)
			assert.Equal(t, tc.want, hits[0].Format(tc.addr))
			assert.True(t, hits[0].SizeDerived)
			if tc.all != nil {
				assert.Equal(t, tc.all, names(hits))
			}
		})
	}

	ft := collect(f, Query{Kind: ByName, Name: "xfs_fs_type"})
	require.Len(t, ft, 1)
	assert.Equal(t, Symbol{Name: "xfs_fs_type", Addr: 0xffffffffc0a02000, SizeDerived: true, Kind: 'd', Module: "xfs"}, ft[0])
	assert.Len(t, collect(f, Query{Kind: ByName, Name: "__per_cpu_start"}), 1)
	assert.Empty(t, collect(f, Query{Kind: ByName, Name: "nope"}))

	xfs, ok := f.Module("xfs")
	require.True(t, ok)
	assert.Equal(t, 3, xfs.Len())
	vm, ok := f.Module("")
	require.True(t, ok)
	assert.Equal(t, 12, vm.Len())
	_, ok = f.Module("ext4")
	assert.False(t, ok)

	c, err := NewChain(f)
	require.NoError(t, err)
	s, err := c.LookupName("kprobe_insn_page")
	require.NoError(t, err)
	assert.Equal(t, "__builtin__kprobes", s.Module)
	var n int
	for _, err := range c.All() {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, f.Len(), n)
}

// TestParseKallsymsSplitModule keeps a module seen in two stretches in file
// order for All while deriving its sizes as one group.
func TestParseKallsymsSplitModule(t *testing.T) {
	text := "c0001000 T start\n" +
		"d0000000 t a1\t[a]\n" +
		"e0000000 t b1\t[b]\n" +
		"d0000100 t a2\t[a]\n" +
		"c0002000 T late\n" +
		"\n" +
		"d0000200 t a3\t[a]\r\n"
	f, err := ParseKallsyms(strings.NewReader(text), "k")
	require.NoError(t, err)
	assert.Equal(t, []string{"start", "a1", "b1", "a2", "late", "a3"}, names(collect(f, Query{Kind: All})))
	s := collect(f, Query{Kind: ByAddr, Addr: 0xd0000010})
	require.Len(t, s, 1)
	assert.Equal(t, "a1+0x10/0x100 [a]", s[0].Format(0xd0000010))
	s = collect(f, Query{Kind: ByAddr, Addr: 0xc0001010})
	require.Len(t, s, 1)
	assert.Equal(t, "start+0x10/0x1000", s[0].Format(0xc0001010))
	assert.Equal(t, []string{"a3"}, names(collect(f, Query{Kind: ByName, Name: "a3"})))
}

// TestParseKallsymsModuleSpace: riscv64 modules' ".L0 " labels, as
// /proc/kallsyms prints them, name included up to the tab.
func TestParseKallsymsModuleSpace(t *testing.T) {
	f, err := ParseKallsyms(strings.NewReader("ffffffff80000000 T _start\nffffffff02f3f0aa t .L0 \t[ext4]\nffffffff02f3f0b0 t ext4_x\t[ext4]\n"), "saved")
	require.NoError(t, err)
	s := collect(f, Query{Kind: ByName, Name: ".L0 "})
	require.Len(t, s, 1)
	assert.Equal(t, "ext4", s[0].Module)
	assert.Equal(t, uint64(0xffffffff02f3f0aa), s[0].Addr)
}

func TestParseKallsymsErrors(t *testing.T) {
	good := "ffffffff81000000 T _text\n"
	for _, tc := range []struct {
		name, text string
		line       int
		msg        string // LineError.Msg: which check refused the line
	}{
		{"no fields", good + "ffffffff81000000\n", 2, `want "ADDRESS TYPE NAME"`},
		{"short address", "ffff81000000 T x\n", 1, "address is not 8 or 16 hex digits"},
		{"bad hex", "ffffffff8100000g T x\n", 1, "address is not hexadecimal"},
		{"long type", good + "ffffffff81000000 TT x\n", 2, "type is not one character between spaces"},
		{"control type", "ffffffff81000000 \x01 x\n", 1, "type is not a printable character"},
		{"empty name", "ffffffff81000000 T \n", 1, "empty name"},
		{"no name", "ffffffff81000000 T\n", 1, "type is not one character between spaces"},
		{"space in name", "ffffffff81000000 T a b\n", 1, "space in name"},
		{"module brackets", "ffffffff81000000 T a\txfs\n", 1, `module is not "[NAME]"`},
		{"empty module", "ffffffff81000000 T a\t[]\n", 1, `module is not "[NAME]"`},
		{"bad module", "ffffffff81000000 T a\t[x y]\n", 1, "bad character in module name"},
		{"empty name with module", "ffffffff81000000 T \t[m]\n", 1, "empty name"},
		{"width change", good + good + "81000000 T x\n", 3, "address has 8 hex digits, earlier lines 16"},
		{"too long", good + "ffffffff81000000 T " + strings.Repeat("x", maxLineLen) + "\n", 2, "line longer than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseKallsyms(strings.NewReader(tc.text), "saved")
			require.Error(t, err)
			assert.Nil(t, f)
			assert.ErrorIs(t, err, ErrCorrupt)
			var le *LineError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.line, le.Num)
			assert.Equal(t, "saved", le.File)
			assert.Equal(t, tc.msg, le.Msg)
			errshape.Require(t, err, "saved: line") // and the line number (errshape)
		})
	}
}

func TestParseKallsymsHidden(t *testing.T) {
	text := "0000000000000000 T _text\n0000000000000000 t foo\n0000000000000000 t bar\t[m]\n"
	_, err := ParseKallsyms(strings.NewReader(text), "k")
	assert.ErrorIs(t, err, ErrAddressesHidden)
	assert.NotErrorIs(t, err, ErrCorrupt)
}

func TestParseKallsymsEdges(t *testing.T) {
	f, err := ParseKallsyms(strings.NewReader(""), "k")
	require.NoError(t, err)
	assert.Zero(t, f.Len())
	assert.Empty(t, collect(f, Query{Kind: ByAddr, Addr: 0}))
	_, ok := f.Module("")
	assert.False(t, ok)

	// 32-bit kernels print 8 digits.
	f, err = ParseKallsyms(strings.NewReader("c1000000 T _text\nc1000100 t x\n"), "k")
	require.NoError(t, err)
	s, ok := f.Indexes()[0].Lookup(0xc1000010)
	require.True(t, ok)
	assert.Equal(t, "_text+0x10/0x100", s.Format(0xc1000010))

	_, err = ParseKallsyms(iotest.ErrReader(assert.AnError), "k")
	assert.ErrorIs(t, err, assert.AnError)
	_, err = ParseKallsyms(iotest.TimeoutReader(strings.NewReader(strings.Repeat("ffffffff81000000 T x\n", 1000))), "k")
	assert.ErrorIs(t, err, iotest.ErrTimeout)
}
