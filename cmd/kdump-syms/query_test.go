package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/corrupttest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAddrBadArguments: an argument that is neither an address nor
// NAME+OFF is a usage error naming it, before the dump is even opened.
func TestAddrBadArguments(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-dump")
	for _, a := range []string{"zz z", "0x", "10000000000000001", "0x10000000000000001", "-1", "", "+0x10", "vfs_write+zz", "a+0x1/0xq"} {
		code, _, stderr := runCLI("addr", missing, "--", a)
		assert.Equal(t, exitUsage, code, a)
		// stderr is read by people: the CLI's contract, checked as text.
		assert.Contains(t, stderr, fmt.Sprintf("%q", a), a)
	}
	code, _, stderr := runCLI("addr", missing, "-1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `"-1" is not an address (negative)`)
	for _, tc := range []struct {
		arg  string
		want addrQuery
	}{
		{"ffffffff8110a2b4", addrQuery{addr: 0xffffffff8110a2b4}},
		{"0XFFFF", addrQuery{addr: 0xffff}},
		{"vfs_write+0xe1", addrQuery{symbol: true, name: "vfs_write", off: 0xe1}},
		{"xfs_file_write_iter+0x5e/0x120 [xfs]", addrQuery{symbol: true, name: "xfs_file_write_iter", off: 0x5e, size: 0x120, sized: true, module: "xfs"}},
		{"xfs:xfs_file_write_iter+94", addrQuery{symbol: true, name: "xfs_file_write_iter", off: 94, module: "xfs"}},
		{"vfs_write", addrQuery{symbol: true, name: "vfs_write", bare: true}},
		{"xfs:xfs_file_write_iter", addrQuery{symbol: true, name: "xfs_file_write_iter", module: "xfs", bare: true}},
		{"xfs_file_write_iter [xfs]", addrQuery{symbol: true, name: "xfs_file_write_iter", module: "xfs", bare: true}},
		{"deadbeef", addrQuery{addr: 0xdeadbeef}},
	} {
		q, err := parseAddrArg(tc.arg)
		require.NoError(t, err, tc.arg)
		tc.want.arg = tc.arg
		assert.Equal(t, tc.want, q)
	}
}

func guestWithXFS(t *testing.T) (*testutil.CorpusGuest, string) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths, ok := g.DumpPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no qemu.elf dump of deb13-6.12-amd64")
	}
	return g, paths[0]
}

func truthSymbol(t *testing.T, g *testutil.CorpusGuest, module, name string) testutil.KallsymsEntry {
	for _, e := range g.Kallsyms(t) {
		if e.Module == module && e.Name == name {
			return e
		}
	}
	t.Fatalf("no %s in %s", name, module)
	return testutil.KallsymsEntry{}
}

// TestReverseAndModules: symbolic arguments of addr are resolved in
// reverse, name and all filter by module, on a real dump.
func TestReverseAndModules(t *testing.T) {
	t.Parallel()
	g, dump := guestWithXFS(t)
	vw := truthSymbol(t, g, "", "vfs_write")
	xw := truthSymbol(t, g, "xfs", "xfs_file_write_iter")
	code, stdout, stderr := runCLI("addr", dump, "vfs_write+0xe1", "xfs_file_write_iter+0x5e [xfs]", "xfs:xfs_file_write_iter+0x5e", "nosuch+0x1")
	assert.Equal(t, exitPartial, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 4, stdout)
	assert.True(t, strings.HasPrefix(lines[0], fmt.Sprintf("%016x vfs_write+0xe1/", vw.Addr+0xe1)), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], fmt.Sprintf("%016x xfs_file_write_iter+0x5e/", xw.Addr+0x5e)), lines[1])
	assert.True(t, strings.HasSuffix(lines[1], " [xfs]"), lines[1])
	assert.Equal(t, lines[1], lines[2])
	assert.Equal(t, "nosuch+0x1 ?", lines[3])
	assert.Contains(t, stderr, "nosuch") // the CLI's stderr, for people: text

	// Never a neighbour (issue 28.3): an offset past the end, or another
	// size, is no answer and says why; a bare name is the symbol.
	code, stdout, stderr = runCLI("addr", dump, "vfs_write")
	require.Equal(t, exitOK, code, stderr)
	var size uint64
	_, err := fmt.Sscanf(stdout, fmt.Sprintf("%016x vfs_write+0x0/0x%%x", vw.Addr), &size)
	require.NoError(t, err, stdout)
	for _, tc := range []struct{ arg, why string }{
		{fmt.Sprintf("vfs_write+%#x", size+1), fmt.Sprintf("offset %#x is past the end of vfs_write (%#x long)", size+1, size)},
		{fmt.Sprintf("vfs_write+0xe1/%#x", size+0x10), fmt.Sprintf("vfs_write is %#x long in this dump, not %#x: the text is from another build", size, size+0x10)},
	} {
		code, stdout, stderr = runCLI("addr", dump, tc.arg)
		assert.Equal(t, exitPartial, code, stderr)
		assert.Equal(t, tc.arg+" ?\n", stdout)
		assert.Contains(t, stderr, tc.why)
	}
	code, stdout, stderr = runCLI("addr", dump, fmt.Sprintf("vfs_write+%#x/%#x", size-1, size))
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, fmt.Sprintf("%016x vfs_write+%#x/%#x\n", vw.Addr+size-1, size-1, size), stdout)

	code, stdout, stderr = runCLI("name", dump, "xfs:xfs_file_write_iter", "vmlinux:vfs_write")
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr, "name: status 0 with a message")
	assert.Equal(t, fmt.Sprintf("%016x t xfs_file_write_iter\t[xfs]\n%016x T vfs_write\n", xw.Addr, vw.Addr), stdout)
	code, _, stderr = runCLI("name", "--module", "xfs", dump, "vfs_write")
	assert.Equal(t, exitPartial, code)
	assert.Contains(t, stderr, "vfs_write")
	code, stdout, _ = runCLI("name", "--module", "xfs", "--glob", dump, "xfs_file_write_it*")
	require.Equal(t, exitOK, code)
	assert.Equal(t, fmt.Sprintf("%016x t xfs_file_write_iter\t[xfs]\n", xw.Addr), stdout)

	code, stdout, stderr = runCLI("all", "--module", "crc16", dump)
	require.Equal(t, exitOK, code, stderr)
	var want []string
	for line := range strings.Lines(string(g.KallsymsText(t))) {
		if strings.HasSuffix(line, "\t[crc16]\n") {
			want = append(want, line)
		}
	}
	require.NotEmpty(t, want)
	assert.Equal(t, strings.Join(want, ""), stdout)
	code, _, _ = runCLI("all", "--module", "no_such_module", dump)
	assert.Equal(t, exitPartial, code)

	// The core kernel alone, without loading the module finders.
	code, stdout, stderr = runCLI("all", "--module", "vmlinux", dump)
	require.Equal(t, exitOK, code, stderr)
	want = want[:0]
	for line := range strings.Lines(string(g.KallsymsText(t))) {
		if !strings.Contains(line, "\t[") {
			want = append(want, line)
		}
	}
	require.NotEmpty(t, want)
	assert.True(t, strings.Join(want, "") == stdout, "all --module vmlinux differs from the vmlinux lines of /proc/kallsyms")
}

// TestSystemMapRoundTrip: --format system.map writes the core kernel only,
// sorted, without a module column, at link-time addresses; --system-map
// reads it back and answers as the dump's own kallsyms does.
func TestSystemMapRoundTrip(t *testing.T) {
	testutil.SkipShort(t, "an output format and a finder over the decoding TestAllCorpus checks; symfinder's TestParseSystemMap and the root package's TestLookupKernelRules read System.map files")
	t.Parallel()
	g, dump := guestWithXFS(t)
	code, stdout, stderr := runCLI("all", "--format", "system.map", dump)
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	assert.Len(t, lines, len(strings.Split(strings.TrimSuffix(string(truthLines(t, g, testutil.SymVmlinux)), "\n"), "\n")))
	assert.NotContains(t, stdout, "\t")
	assert.True(t, slices.IsSorted(lines) || slices.IsSortedFunc(lines, func(a, b string) int { return strings.Compare(a[:16], b[:16]) }))
	slide, ok := kaslrOf(t, dump)
	require.True(t, ok)
	vw := truthSymbol(t, g, "", "vfs_write")
	assert.True(t, strings.Contains(stdout, fmt.Sprintf("%016x T vfs_write\n", vw.Addr-slide)), "vfs_write at its link-time address")

	m := filepath.Join(t.TempDir(), "System.map")
	require.NoError(t, os.WriteFile(m, []byte(stdout), 0o644))
	args := []string{fmt.Sprintf("%#x", vw.Addr+0xe1), "vfs_write+0x10", fmt.Sprintf("%#x", truthSymbol(t, g, "", "_end").Addr-1), "0"}
	code, fromDump, _ := runCLI(append([]string{"addr", dump}, args...)...)
	assert.Equal(t, exitPartial, code) // 0 is in no symbol
	code, fromMap, _ := runCLI(append([]string{"addr", "--system-map", m, "--finders", "system.map", dump}, args...)...)
	assert.Equal(t, exitPartial, code)
	assert.Equal(t, fromDump, fromMap)
}

func kaslrOf(t *testing.T, dump string) (uint64, bool) {
	_, stdout, _ := runCLI("info", dump)
	for line := range strings.Lines(stdout) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.Contains(strings.ToLower(k), "kaslr") {
			if x, err := strconv.ParseUint(strings.TrimSpace(v), 0, 64); err == nil {
				return x, true
			}
		}
	}
	return 0, false
}

// TestIssue28JSON: modules and addr print JSON too, one object a line,
// addresses as hex strings; modules' JSON says what its text says (each
// line rebuilt from the object equals the text line), unknowns as null
// with why.
func TestIssue28JSON(t *testing.T) {
	testutil.SkipShort(t, "an output format of modules and addr over the decoding TestReverseAndModules and the modules corpus tests check")
	t.Parallel()
	for _, c := range sampleDumps(t, "deb13-6.12-amd64", "deb14-7.2-armhf") {
		t.Run(c.g.Name, func(t *testing.T) {
			code, text, stderr := runCLI("modules", c.dump)
			require.Equal(t, exitOK, code, stderr)
			code, js, stderr := runCLI("modules", "--format", "json", c.dump)
			require.Equal(t, exitOK, code, stderr)
			want := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			got := strings.Split(strings.TrimSuffix(js, "\n"), "\n")
			require.Len(t, got, len(want))
			for i, line := range got {
				var m struct {
					Name, State, Address string
					Size                 uint64
					RefCount             *int64 `json:"refcount"`
					Users                []string
					UsersUnknown         string `json:"users_unknown"`
					Taints               *string
					TaintsUnknown        string `json:"taints_unknown"`
					RefCountUnknown      string `json:"refcount_unknown"`
					StructModule         string `json:"struct_module"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &m), line)
				ref, users, flags := "?", "?", " (?)"
				if m.RefCount != nil {
					ref = strconv.FormatInt(*m.RefCount, 10)
				} else {
					assert.NotEmpty(t, m.RefCountUnknown)
				}
				if m.Users != nil && m.UsersUnknown == "" {
					users = "-"
					if len(m.Users) > 0 {
						users = strings.Join(m.Users, ",") + ","
					}
				}
				if m.Taints != nil {
					flags = ""
					if *m.Taints != "" {
						flags = " (" + *m.Taints + ")"
					}
				} else {
					assert.NotEmpty(t, m.TaintsUnknown)
				}
				assert.Equal(t, want[i], fmt.Sprintf("%s %d %s %s %s %s%s", m.Name, m.Size, ref, users, m.State, m.Address, flags))
				assert.True(t, strings.HasPrefix(m.StructModule, "0x"))
			}
		})
	}
	_, dump := guestWithXFS(t)
	code, stdout, _ := runCLI("addr", "--format", "json", dump, "vfs_write+0x10", "vfs_write+0x999999", "0")
	assert.Equal(t, exitPartial, code)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	var a struct {
		Query, Symbol, Formatted, Error string
		Addr                            *string
		Offset, Size                    *uint64
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &a))
	assert.Equal(t, "vfs_write", a.Symbol)
	assert.Equal(t, uint64(0x10), *a.Offset)
	assert.True(t, strings.HasPrefix(*a.Addr, "0xffffffff"), *a.Addr)
	assert.True(t, strings.HasPrefix(a.Formatted, "vfs_write+0x10/"), a.Formatted)
	a = struct {
		Query, Symbol, Formatted, Error string
		Addr                            *string
		Offset, Size                    *uint64
	}{}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &a))
	assert.Nil(t, a.Addr)
	assert.Contains(t, a.Error, "past the end of vfs_write")
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &a))
	assert.Equal(t, "0x0000000000000000", *a.Addr)
	assert.NotEmpty(t, a.Error)
	code, _, _ = runCLI("addr", "--format", "json", dump, "-")
	assert.Equal(t, exitUsage, code)
}

// TestIssue28SystemMapNeedsOffset: a System.map holds link-time addresses;
// where the KASLR offset is unknown (i386 writes no KERNELOFFSET, and its
// corpus kernel ran 0xa000000 above its link address) none is written
// instead of runtime addresses passed off as link-time ones. riscv64's
// offset comes from NUMBER(KERNEL_LINK_ADDR) and _start, 32-bit ARM's is 0.
func TestIssue28SystemMapNeedsOffset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		guest string
		ok    bool
	}{{"deb11-5.10-i386", false}, {"deb13-6.12-riscv64", true}, {"deb13-6.12-armhf", true}} {
		g := testutil.CorpusGuestNamed(t, tc.guest)
		f, ok := g.OneDump()
		if !ok {
			continue
		}
		paths, _ := g.DumpPaths(f)
		s, err := kdumpsyms.Open(kdumpsyms.Options{Lazy: true}, paths...)
		require.NoError(t, err)
		off, known := s.KASLROffset()
		s.Close()
		assert.Equal(t, tc.ok, known, tc.guest)
		if tc.ok {
			assert.Zero(t, off, tc.guest) // neither kernel has KASLR
			continue
		}
		code, stdout, stderr := runCLI("all", "--format", "system.map", paths[0])
		assert.Equal(t, exitError, code, tc.guest)
		assert.Contains(t, stderr, "KASLR offset is unknown", tc.guest)
		assert.Empty(t, stdout, tc.guest)
	}
}

// TestIssue28FileOverlap: a /proc/kallsyms file of the dump's own boot
// given beside it adds nothing the dump has: all prints each symbol once,
// byte for byte the guest's /proc/kallsyms; JSON names each answer's
// source.
func TestIssue28FileOverlap(t *testing.T) {
	testutil.SkipShort(t, "a file finder beside the dump's; TestReverseAndModules reads the dump's own")
	t.Parallel()
	g, dump := guestWithXFS(t)
	file := filepath.Join(t.TempDir(), "kallsyms")
	require.NoError(t, os.WriteFile(file, g.KallsymsText(t), 0o644))
	code, stdout, stderr := runCLI("all", "--kallsyms", file, dump)
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, stdout == string(g.KallsymsText(t)), "all with the guest's own kallsyms file beside the dump differs from it")
	code, stdout, stderr = runCLI("addr", "--format", "json", "--finders", "kallsyms-file,kallsyms", "--kallsyms", file, dump, "vfs_write")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, `"source":"kallsyms-file"`)
	code, stdout, stderr = runCLI("addr", "-v", "--kallsyms", file, dump, "vfs_write")
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "\t(kallsyms)\n"), stdout)
}

// TestIssue28ModulesUsersHole: on a copy of a real dump with the page of a
// struct module_use left out, modules shows the users it could read and
// "?" for the rest, says which page on stderr, and exits 3; before, the
// column printed "-" (no users) with status 0.
func TestIssue28ModulesUsersHole(t *testing.T) {
	t.Parallel()
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths, ok := g.ExtractPaths(testutil.DumpQEMUELF)
	if !ok {
		t.Skip("no committed QEMU ELF extract of deb13-6.12-amd64")
	}
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, paths[0])
	require.NoError(t, err)
	set, err := s.Modules()
	require.NoError(t, err)
	b, _, err := s.BTF()
	require.NoError(t, err)
	mod, err := b.Struct("module", "source_list")
	require.NoError(t, err)
	use, err := b.Struct("module_use", "source_list")
	require.NoError(t, err)
	srcList, _ := mod.Field("source_list")
	useList, _ := use.Field("source_list")
	kmem, err := s.Kernel()
	require.NoError(t, err)
	var victim *modsyms.Module
	var useAddr uint64
	for _, m := range set.Modules() {
		if len(m.Deps) < 2 {
			continue
		}
		first, err := memory.Uint64(kmem, binary.LittleEndian, m.Addr+srcList.Offset)
		require.NoError(t, err)
		second, err := memory.Uint64(kmem, binary.LittleEndian, first)
		require.NoError(t, err)
		if (second-useList.Offset)&^4095 != (first-useList.Offset)&^4095 {
			victim, useAddr = m, second-useList.Offset
			break
		}
	}
	s.Close()
	if victim == nil {
		t.Skip("no module with two users on two pages")
	}
	hole, page := corrupttest.Hole(t, paths[0], useAddr)
	code, stdout, stderr := runCLI("modules", hole)
	assert.Equal(t, exitPartial, code, stderr)
	var line string
	for l := range strings.Lines(stdout) {
		if strings.HasPrefix(l, victim.Name+" ") {
			line = l
		}
	}
	fields := strings.Fields(line)
	require.GreaterOrEqual(t, len(fields), 4, line)
	assert.Equal(t, victim.Deps[0]+",?", fields[3], line)
	lines := stderrLines(stderr)
	require.Len(t, lines, 1, stderr)
	assert.Contains(t, lines[0], victim.Name)
	assert.Contains(t, lines[0], "page not present in dump")
	var at uint64
	i := strings.LastIndex(lines[0], "physical memory at ")
	require.GreaterOrEqual(t, i, 0, lines[0])
	_, err = fmt.Sscanf(lines[0][i:], "physical memory at %v", &at)
	require.NoError(t, err)
	assert.Equal(t, page, at&^4095, "the address named is in the page left out")
}
