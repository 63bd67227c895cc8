package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// isfFile is the part of an ISF file the tests read.
type isfFile struct {
	Metadata struct {
		Format   string
		Producer struct{ Name, Version string }
	}
	BaseTypes map[string]struct {
		Size   int
		Signed bool
		Kind   string
		Endian string
	} `json:"base_types"`
	UserTypes map[string]struct {
		Kind   string
		Size   int
		Fields map[string]struct {
			Offset int
			Type   map[string]any
		}
	} `json:"user_types"`
	Enums   map[string]json.RawMessage
	Symbols map[string]struct {
		Address      uint64
		Type         map[string]any
		ConstantData string `json:"constant_data"`
	}
}

// decodeISF decodes an ISF file in one pass (it is 30 MB), returning it
// and its top-level keys in file order.
func decodeISF(t *testing.T, raw []byte) (*isfFile, []string) {
	t.Helper()
	f := new(isfFile)
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		key := tok.(string)
		keys = append(keys, key)
		var dst any = new(json.RawMessage)
		switch key {
		case "metadata":
			dst = &f.Metadata
		case "base_types":
			dst = &f.BaseTypes
		case "user_types":
			dst = &f.UserTypes
		case "enums":
			dst = &f.Enums
		case "symbols":
			dst = &f.Symbols
		}
		require.NoError(t, dec.Decode(dst), key)
	}
	tok, err = dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('}'), tok)
	_, err = dec.Token()
	require.Equal(t, io.EOF, err, "data after the object")
	return f, keys
}

// TestExportISFCorpus: `kdump-syms export --format isf` of a committed
// extract (6.12 amd64, KASLR) writes JSON holding the keys volatility3's
// schema requires; struct offsets equal the dump's BTF as btflayout reads
// it; every vmlinux symbol of the guest's /proc/kallsyms is there at its
// address minus VMCOREINFO's KERNELOFFSET (absolute ones unshifted); the
// symbols volatility3 reads are typed; linux_banner holds the banner the
// guest's uname printed.
func TestExportISFCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("exports a whole kernel's types and symbols (30 MB of JSON): not with -short")
	}
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	dump := g.RequireDump(t, testutil.DumpQEMUELF)[0]
	out := filepath.Join(t.TempDir(), "symbols", "linux", "deb13.json") // directories created
	code, stdout, stderr := runCLI("export", "--format", "isf", "-o", out, dump)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, out+"\n", stdout)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	f, keys := decodeISF(t, raw)
	assert.ElementsMatch(t, []string{"metadata", "base_types", "user_types", "enums", "symbols"}, keys, "the schema allows no other key")
	assert.Equal(t, "6.2.0", f.Metadata.Format)
	assert.Equal(t, "kdump-syms", f.Metadata.Producer.Name)
	assert.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, f.Metadata.Producer.Version)

	for name, want := range map[string]struct {
		size   int
		signed bool
		kind   string
	}{
		"int": {4, true, "int"}, "long unsigned int": {8, false, "int"}, "char": {1, false, "char"},
		"_Bool": {1, false, "bool"}, "pointer": {8, false, "int"}, "void": {0, false, "void"},
	} {
		bt, ok := f.BaseTypes[name]
		if assert.True(t, ok, name) {
			assert.Equal(t, want.size, bt.Size, name)
			assert.Equal(t, want.signed, bt.Signed, name)
			assert.Equal(t, want.kind, bt.Kind, name)
			assert.Equal(t, "little", bt.Endian, name)
		}
	}

	// Struct offsets: what btflayout reads from the same BTF.
	s, err := kdumpsyms.Open(kdumpsyms.Options{}, dump)
	require.NoError(t, err)
	defer s.Close()
	b, _, err := s.BTF()
	require.NoError(t, err)
	for st, fields := range map[string][]string{
		"task_struct": {"tasks", "pid", "tgid", "comm", "real_parent", "mm", "files"},
		"module":      {"list", "name", "state", "mem"},
		"list_head":   {"next", "prev"},
	} {
		layout, err := b.Struct(st, fields...)
		require.NoError(t, err, st)
		ut, ok := f.UserTypes[st]
		require.True(t, ok, st)
		assert.Equal(t, "struct", ut.Kind)
		for _, name := range fields {
			fl, _ := layout.Field(name)
			assert.Equal(t, int(fl.Offset), ut.Fields[name].Offset, "%s.%s", st, name)
		}
	}
	comm := f.UserTypes["task_struct"].Fields["comm"].Type
	assert.Equal(t, map[string]any{"kind": "array", "count": 16.0, "subtype": map[string]any{"kind": "base", "name": "char"}}, comm)

	// Symbols: link-time addresses.
	kaslr, ok := s.KASLROffset()
	require.True(t, ok)
	require.NotZero(t, kaslr, "the guest runs with KASLR")
	n := 0
	for _, e := range g.Kallsyms(t) {
		if e.Kind != testutil.SymVmlinux {
			continue
		}
		sym, ok := f.Symbols[e.Name]
		if !ok { // a plain if: 190,000 symbols
			t.Errorf("%s: not in the ISF file's symbols", e.Name)
			continue
		}
		want := e.Addr - kaslr
		if e.Type == 'a' || e.Type == 'A' {
			want = e.Addr
		}
		if sym.Address == want {
			n++
		}
	}
	assert.Greater(t, n, 150000, "symbols at their link-time address")
	assert.Equal(t, uint64(0xffffffff81000000), f.Symbols["_text"].Address, "x86_64 links the kernel at 0xffffffff81000000")
	for name, want := range map[string]map[string]any{
		"init_task":    {"kind": "struct", "name": "task_struct"},
		"init_files":   {"kind": "struct", "name": "files_struct"},
		"modules":      {"kind": "struct", "name": "list_head"},
		"init_uts_ns":  {"kind": "struct", "name": "uts_namespace"},
		"prb":          {"kind": "pointer", "subtype": map[string]any{"kind": "struct", "name": "printk_ringbuffer"}},
		"init_top_pgt": {"kind": "array", "count": 0.0, "subtype": map[string]any{"kind": "struct", "name": "pgd_t"}},
	} {
		assert.Equal(t, want, f.Symbols[name].Type, name)
	}
	_, ok = f.UserTypes["pgd_t"]
	assert.True(t, ok, "a typedef of an anonymous struct is a user type")
	banner, err := base64.StdEncoding.DecodeString(f.Symbols["linux_banner"].ConstantData)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(banner), "Linux version "+strings.TrimSpace(g.Uname(t))+" "), "%q", banner)
	assert.True(t, strings.HasSuffix(string(banner), "\n\x00"), "%q", banner)
}
