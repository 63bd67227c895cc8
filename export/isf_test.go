package export

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// isfSpec is a small BTF: base types, a typedef of an anonymous struct,
// a struct with an anonymous union member, bitfields, a qualified pointer
// and a char array, a signed enum, and two structs named dup of which
// only the second is referred to.
func isfSpec(t testing.TB) *btf.Spec {
	b := isfBuilder(t)
	spec, err := b.Spec()
	require.NoError(t, err)
	return spec
}

// isfBuilder builds isfSpec's types.
func isfBuilder(t testing.TB) *btf.Builder {
	t.Helper()
	i32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	u32 := &btf.Int{Name: "unsigned int", Size: 4}
	ch := &btf.Int{Name: "char", Size: 1}
	ul := &btf.Int{Name: "long unsigned int", Size: 8}
	boolT := &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	u8 := &btf.Typedef{Name: "u8", Type: &btf.Int{Name: "unsigned char", Size: 1}}
	pgd := &btf.Typedef{Name: "pgd_t", Type: &btf.Struct{Size: 8, Members: []btf.Member{{Name: "pgd", Type: ul}}}}
	state := &btf.Enum{Name: "state", Size: 4, Signed: true, Values: []btf.EnumValue{{Name: "RUNNING", Value: 0}, {Name: "DEAD", Value: 0xffffffffffffffff}}}
	dupUnused := &btf.Struct{Name: "dup", Size: 4, Members: []btf.Member{{Name: "x", Type: i32}}}
	dupUsed := &btf.Struct{Name: "dup", Size: 8, Members: []btf.Member{{Name: "y", Type: ul}}}
	task := &btf.Struct{Name: "task_struct", Size: 64, Members: []btf.Member{
		{Name: "pid", Type: i32, Offset: 0},
		{Name: "", Type: &btf.Union{Size: 4, Members: []btf.Member{{Name: "x", Type: i32}, {Name: "y", Type: u32}}}, Offset: 32},
		{Name: "f1", Type: u32, Offset: 64, BitfieldSize: 3},
		{Name: "f2", Type: u8, Offset: 67, BitfieldSize: 5},
		{Name: "f3", Type: u32, Offset: 96 + 2, BitfieldSize: 30},
		{Name: "", Type: u32, Offset: 128, BitfieldSize: 2}, // padding
		{Name: "p", Type: &btf.Pointer{Target: &btf.Const{Type: pgd}}, Offset: 192},
		{Name: "comm", Type: &btf.Array{Index: u32, Type: ch, Nelems: 16}, Offset: 256},
		{Name: "st", Type: state, Offset: 384},
		{Name: "d", Type: dupUsed, Offset: 448},
		{Name: "flag", Type: boolT, Offset: 160},
		{Name: "fn", Type: &btf.Pointer{Target: &btf.FuncProto{Return: i32}}, Offset: 448},
	}}
	list := &btf.Struct{Name: "list_head", Size: 16}
	list.Members = []btf.Member{{Name: "next", Type: &btf.Pointer{Target: list}}, {Name: "prev", Type: &btf.Pointer{Target: list}, Offset: 64}}
	b, err := btf.NewBuilder([]btf.Type{task, list, dupUnused, &btf.Pointer{Target: dupUsed}}, nil)
	require.NoError(t, err)
	return b
}

func writeTestISF(t *testing.T, bo binary.ByteOrder) (map[string]any, ISFStats) {
	t.Helper()
	in := &ISF{
		Producer: "kdump-syms", Version: ISFVersion("v1.2.3-0.2026"), Spec: isfSpec(t),
		Target: memory.Target{ByteOrder: bo, PtrSize: 8}, KASLROffset: 0x9000000,
		Banner: []byte("Linux version 6.12.0 (x) #1\n\x00"),
		Symbols: []symfinder.Symbol{
			sym("fixed_percpu_data", 0, 0, 'A'),
			sym("runqueues", 0x36040, 0, 'A'),
			sym("_text", 0xffffffff8a000000, 0, 'T'),
			sym("twice", 0xffffffff8a000100, 0, 't'),
			sym("twice", 0xffffffff8a000200, 0, 't'),
			sym("init_task", 0xffffffff8b000000, 0, 'D'),
			sym("modules", 0xffffffff8b100000, 0, 'd'),
			sym("twice", 0xffffffff8a000300, 0, 'T'),
			sym("init_top_pgt", 0xffffffff8b200000, 0, 'D'),
			sym("linux_banner", 0xffffffff8b300000, 0, 'D'),
			sym("prb", 0xffffffff8b400000, 0, 'D'), // no struct printk_ringbuffer: untyped
		},
	}
	var out bytes.Buffer
	st, err := WriteISF(&out, in)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
	return doc, st
}

// obj walks a parsed JSON document by keys.
func obj(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v at %s", v, k)
		v, ok = m[k]
		require.True(t, ok, "no %s in %v", k, m)
	}
	return v
}

func TestWriteISF(t *testing.T) {
	doc, st := writeTestISF(t, binary.LittleEndian)
	assert.Len(t, doc, 5)
	assert.Equal(t, map[string]any{
		"format":   "6.2.0",
		"linux":    map[string]any{"symbols": []any{map[string]any{"kind": "symtab", "name": "kallsyms"}}},
		"producer": map[string]any{"name": "kdump-syms", "version": "1.2.3"},
	}, doc["metadata"])
	assert.Equal(t, map[string]any{"endian": "little", "kind": "int", "signed": true, "size": 4.0}, obj(t, doc, "base_types", "int"))
	assert.Equal(t, map[string]any{"endian": "little", "kind": "char", "signed": false, "size": 1.0}, obj(t, doc, "base_types", "char"))
	assert.Equal(t, map[string]any{"endian": "little", "kind": "bool", "signed": false, "size": 1.0}, obj(t, doc, "base_types", "_Bool"))
	assert.Equal(t, map[string]any{"endian": "little", "kind": "int", "signed": false, "size": 8.0}, obj(t, doc, "base_types", "pointer"))
	assert.Equal(t, map[string]any{"endian": "little", "kind": "void", "signed": false, "size": 0.0}, obj(t, doc, "base_types", "void"))

	fields := obj(t, doc, "user_types", "task_struct", "fields").(map[string]any)
	assert.Equal(t, 64.0, obj(t, doc, "user_types", "task_struct", "size"))
	assert.Equal(t, "struct", obj(t, doc, "user_types", "task_struct", "kind"))
	assert.Equal(t, map[string]any{"offset": 0.0, "type": map[string]any{"kind": "base", "name": "int"}}, fields["pid"])
	anon := fields["unnamed_field_0"].(map[string]any)
	assert.Equal(t, true, anon["anonymous"])
	assert.Equal(t, 4.0, anon["offset"])
	un := obj(t, anon, "type", "name").(string)
	assert.Equal(t, "union", obj(t, anon, "type", "kind"))
	assert.Equal(t, "union", obj(t, doc, "user_types", un, "kind"))
	assert.NotContains(t, fields, "unnamed_field_1", "an unnamed bitfield is padding")
	bit := func(pos, n float64, base string) map[string]any {
		return map[string]any{"kind": "bitfield", "bit_position": pos, "bit_length": n, "type": map[string]any{"kind": "base", "name": base}}
	}
	assert.Equal(t, map[string]any{"offset": 8.0, "type": bit(0, 3, "unsigned int")}, fields["f1"])
	assert.Equal(t, map[string]any{"offset": 8.0, "type": bit(3, 5, "unsigned char")}, fields["f2"], "a typedef'd bitfield's type is resolved; unit of its size")
	assert.Equal(t, map[string]any{"offset": 12.0, "type": bit(2, 30, "unsigned int")}, fields["f3"])
	assert.Equal(t, map[string]any{"kind": "pointer", "subtype": map[string]any{"kind": "struct", "name": "pgd_t"}}, obj(t, fields["p"], "type"))
	assert.Equal(t, map[string]any{"kind": "array", "count": 16.0, "subtype": map[string]any{"kind": "base", "name": "char"}}, obj(t, fields["comm"], "type"))
	assert.Equal(t, map[string]any{"kind": "enum", "name": "state"}, obj(t, fields["st"], "type"))
	assert.Equal(t, map[string]any{"kind": "pointer", "subtype": map[string]any{"kind": "function"}}, obj(t, fields["fn"], "type"))
	assert.Equal(t, map[string]any{"pgd": map[string]any{"offset": 0.0, "type": map[string]any{"kind": "base", "name": "long unsigned int"}}},
		obj(t, doc, "user_types", "pgd_t", "fields"), "a typedef of an anonymous struct is a user type")
	assert.Equal(t, 8.0, obj(t, doc, "user_types", "dup", "size"), "the dup referred to")
	assert.Equal(t, 1, st.Duplicates)
	assert.Equal(t, map[string]any{"size": 4.0, "base": "int", "constants": map[string]any{"RUNNING": 0.0, "DEAD": -1.0}}, obj(t, doc, "enums", "state"))

	syms := doc["symbols"].(map[string]any)
	assert.Len(t, syms, 9)
	assert.Equal(t, 9, st.Symbols)
	assert.Equal(t, map[string]any{"address": float64(0xffffffff81000000), "type": map[string]any{"kind": "array", "count": 0.0, "subtype": map[string]any{"kind": "base", "name": "char"}}}, syms["_text"])
	assert.Equal(t, map[string]any{"address": float64(0x36040)}, syms["runqueues"], "absolute: not shifted")
	assert.Equal(t, map[string]any{"address": float64(0xffffffff81000300)}, syms["twice"], "the global one")
	assert.Equal(t, map[string]any{"kind": "struct", "name": "task_struct"}, obj(t, syms, "init_task", "type"))
	assert.Equal(t, map[string]any{"kind": "struct", "name": "list_head"}, obj(t, syms, "modules", "type"))
	assert.Equal(t, map[string]any{"kind": "array", "count": 0.0, "subtype": map[string]any{"kind": "struct", "name": "pgd_t"}}, obj(t, syms, "init_top_pgt", "type"))
	assert.Equal(t, map[string]any{"address": float64(0xffffffff82400000)}, syms["prb"])
	banner, err := base64.StdEncoding.DecodeString(obj(t, syms, "linux_banner", "constant_data").(string))
	require.NoError(t, err)
	assert.Equal(t, "Linux version 6.12.0 (x) #1\n\x00", string(banner))
	assert.Equal(t, map[string]any{"kind": "array", "count": 29.0, "subtype": map[string]any{"kind": "base", "name": "char"}}, obj(t, syms, "linux_banner", "type"))
	assert.Equal(t, 5, st.TypedSymbols)
}

// TestWriteISFBigEndian: bit positions count from the storage unit's
// least significant bit, which on a big-endian machine is its last byte.
func TestWriteISFBigEndian(t *testing.T) {
	doc, _ := writeTestISF(t, binary.BigEndian)
	fields := obj(t, doc, "user_types", "task_struct", "fields").(map[string]any)
	assert.Equal(t, 29.0, obj(t, fields["f1"], "type", "bit_position"))
	assert.Equal(t, 0.0, obj(t, fields["f2"], "type", "bit_position"))
	assert.Equal(t, 0.0, obj(t, fields["f3"], "type", "bit_position"))
	assert.Equal(t, "big", obj(t, doc, "base_types", "int", "endian"))
}

func TestISFVersion(t *testing.T) {
	for in, want := range map[string]string{"v1.2.3": "1.2.3", "v0.0.0-20261204-abcdef": "0.0.0", "(devel)": "0.0.0", "": "0.0.0", "2.11.0": "2.11.0"} {
		assert.Equal(t, want, ISFVersion(in), in)
	}
}

func TestWriteISFErrors(t *testing.T) {
	le := binary.LittleEndian
	_, err := WriteISF(&bytes.Buffer{}, &ISF{Target: memory.Target{ByteOrder: le, PtrSize: 8}})
	assert.ErrorIs(t, err, ErrNoBTF)
	bad := memory.Target{ByteOrder: le, PtrSize: 3}
	_, err = WriteISF(&bytes.Buffer{}, &ISF{Spec: isfSpec(t), Target: bad})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Equal(t, bad.Check(), errors.Unwrap(err), "the Target's own check fails")
	_, err = WriteISF(&bytes.Buffer{}, &ISF{Spec: isfSpec(t)})
	assert.ErrorIs(t, err, memory.ErrUnknownTarget)
}
