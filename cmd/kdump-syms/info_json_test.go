package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInfoJSONCorpus: info --format json names the guest's release and
// build ID with and without decoding symbols; with them, the kallsyms
// finder counts the vmlinux lines of /proc/kallsyms.
//
// An output format over the decoding TestAllCorpus checks: run on x86_64
// with KASLR, i386 (32-bit, no KALLSYMS_ALL, no BTF) and big-endian s390x
// (no KASLR).
func TestInfoJSONCorpus(t *testing.T) {
	t.Parallel()
	for _, c := range sampleDumps(t, "deb11-5.10-i386", "deb13-6.12-amd64", "deb13-6.12-s390x") {
		g, dump := c.g, c.dump
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			in, err := vmcoreinfo.Parse(g.VMCOREINFO(t))
			require.NoError(t, err)
			wantID, ok := in.BuildID()
			require.True(t, ok)

			code, stdout, stderr := runCLI("info", "--format", "json", "--no-symbols", dump)
			require.Equal(t, exitOK, code, stderr)
			var quick infoReport
			require.NoError(t, json.Unmarshal([]byte(stdout), &quick))
			assert.Equal(t, g.Uname(t), quick.Release)
			assert.Equal(t, wantID, quick.BuildID)
			assert.Equal(t, g.ArchName(), quick.Architecture.Name)
			assert.Nil(t, quick.Kallsyms)
			assert.Empty(t, quick.Finders)
			if off, ok := in.KernelOffset(); ok {
				assert.Equal(t, off, parseHex(t, quick.KASLROffset))
			}

			code, stdout, stderr = runCLI("info", "--format", "json", dump)
			require.Equal(t, exitOK, code, stderr)
			var full infoReport
			require.NoError(t, json.Unmarshal([]byte(stdout), &full))
			assert.Equal(t, quick.Release, full.Release)
			require.NotNil(t, full.Kallsyms)
			assert.Empty(t, full.Kallsyms.Error)
			require.NotEmpty(t, full.Finders)
			assert.Equal(t, "kallsyms", full.Finders[0].Name)
			vmlinux := bytes.Count(truthLines(t, g, testutil.SymVmlinux), []byte("\n"))
			assert.Equal(t, vmlinux, full.Finders[0].Symbols)
		})
	}
}

func parseHex(t *testing.T, s string) uint64 {
	t.Helper()
	var v uint64
	_, err := fmt.Sscanf(s, "0x%x", &v)
	require.NoError(t, err)
	return v
}

// TestVMCOREINFOCorpus: the vmcoreinfo command prints the note text the
// corpus tool recorded from the QEMU ELF dump, whatever the container, and
// single values.
func TestVMCOREINFOCorpus(t *testing.T) {
	for _, c := range corpusDumps(t) {
		g, dump := c.g, c.dump
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI("vmcoreinfo", dump)
			require.Equal(t, exitOK, code, stderr)
			assert.Equal(t, strings.TrimRight(string(g.VMCOREINFO(t)), "\x00\n")+"\n", stdout)
			code, stdout, _ = runCLI("vmcoreinfo", dump, "OSRELEASE", "NO_SUCH_KEY")
			assert.Equal(t, exitPartial, code)
			assert.Equal(t, g.Uname(t)+"\n", stdout)
		})
	}
}
