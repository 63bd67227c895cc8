package btflayout

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// ciliumFields flattens a cilium/ebpf struct as Struct's fields are meant
// to be: the reference the raw decoder is checked against.
func ciliumFields(out []Field, members []btf.Member, baseBits uint64) []Field {
	for _, m := range members {
		off := baseBits + uint64(m.Offset)
		if m.Name == "" {
			switch t := btf.UnderlyingType(m.Type).(type) {
			case *btf.Struct:
				out = ciliumFields(out, t.Members, off)
			case *btf.Union:
				out = ciliumFields(out, t.Members, off)
			}
			continue
		}
		f := Field{Name: m.Name, Offset: off / 8}
		if m.BitfieldSize > 0 {
			f.BitOffset, f.BitSize = off, uint64(m.BitfieldSize)
		}
		if n, err := btf.Sizeof(m.Type); err == nil {
			f.Size = uint64(n)
		}
		switch t := btf.UnderlyingType(m.Type).(type) {
		case *btf.Int:
			f.Kind = KindInt
		case *btf.Pointer:
			f.Kind = KindPointer
			f.TypeName = btf.UnderlyingType(t.Target).TypeName()
		case *btf.Array:
			f.Kind = KindArray
			f.Count = uint64(t.Nelems)
			f.TypeName = btf.UnderlyingType(t.Type).TypeName()
			if n, err := btf.Sizeof(t.Type); err == nil {
				f.ElemSize = uint64(n)
			}
		case *btf.Struct:
			f.Kind, f.TypeName = KindStruct, t.Name
		case *btf.Union:
			f.Kind, f.TypeName = KindUnion, t.Name
		case *btf.Enum:
			f.Kind, f.TypeName = KindEnum, t.Name
		default:
			f.Kind = KindOther
		}
		out = append(out, f)
	}
	return out
}

// decoderTypes are the structs and enums the decoders ask for, always
// compared; of the others, every sampleStride'th name is.
var decoderTypes = map[string]bool{"module": true, "mod_kallsyms": true, "module_memory": true, "module_layout": true,
	"list_head": true, "kernel_symbol": true, "module_use": true, "mod_mem_type": true, "bpf_ksym": true,
	"bpf_prog_aux": true, "bpf_prog": true, "bpf_func_info": true, "bpf_trampoline": true, "kprobe_insn_cache": true,
	"kprobe_insn_page": true, "ftrace_ops": true, "module_state": true}

const sampleStride = 17

// compareWithCilium checks that the named structs, unions and enums of a
// real blob decode as cilium/ebpf decodes them: those the decoders use, and
// a sample of the rest (all of them take minutes).
func compareWithCilium(t *testing.T, raw []byte) {
	b, err := ParseBTF(raw, "test")
	require.NoError(t, err)
	spec, err := b.Spec()
	require.NoError(t, err)
	seen := map[string]bool{}
	nStructs, nEnums := 0, 0
	for typ, err := range spec.All() {
		require.NoError(t, err)
		name := typ.TypeName()
		if name == "" || seen[name] {
			continue
		}
		if len(seen)%sampleStride != 0 && !decoderTypes[name] {
			seen[name] = true
			continue
		}
		switch typ.(type) {
		case *btf.Struct, *btf.Union:
		case *btf.Enum:
			want, err := b.Enum(name)
			require.NoError(t, err, name)
			types, err := spec.AnyTypesByName(name)
			require.NoError(t, err)
			for _, ty := range types {
				if e, ok := ty.(*btf.Enum); ok {
					got := map[string]int64{}
					for _, v := range e.Values {
						got[v.Name] = int64(v.Value)
					}
					if !reflect.DeepEqual(got, want) {
						require.Equal(t, got, want, name)
					}
					break
				}
			}
			seen[name] = true
			nEnums++
			continue
		default:
			continue
		}
		seen[name] = true
		types, err := spec.AnyTypesByName(name)
		require.NoError(t, err)
		var want []*Struct
		for _, ty := range types {
			switch ty := ty.(type) {
			case *btf.Struct:
				want = append(want, &Struct{Name: name, Size: uint64(ty.Size), fields: ciliumFields(nil, ty.Members, 0)})
			case *btf.Union:
				want = append(want, &Struct{Name: name, Size: uint64(ty.Size), fields: ciliumFields(nil, ty.Members, 0)})
			}
		}
		got, err := b.r.structs(name)
		require.NoError(t, err, name)
		if !reflect.DeepEqual(want, got) {
			require.Equal(t, want, got, name)
		}
		nStructs++
	}
	require.Greater(t, nStructs, 300)
	require.Greater(t, nEnums, 40)
	t.Logf("%d structs and unions, %d enums agree", nStructs, nEnums)
}

func TestRawMatchesCiliumHost(t *testing.T) {
	testutil.SkipShort(t, "the host's kernel is another guest; cilium/ebpf inflating each of its types is most of the package's CPU; every session of the short guest decodes its BTF (the root package's TestBTFFoundOnce, TestSessionCorpus)")
	compareWithCilium(t, hostBTF(t))
}

// TestRawMatchesCiliumCorpus reads each corpus kernel's BTF out of its dump
// (through the ground truth's __start_BTF/__stop_BTF).
func TestRawMatchesCiliumCorpus(t *testing.T) {
	any := false
	// The oldest kernel, and one with ENUM64 types; the others add test
	// time, not kinds of BTF.
	for _, g := range testutil.Sample(t, "deb11-5.10-amd64", "deb13-6.12-arm64") {
		dumps := g.AvailableDumps()
		if len(dumps) == 0 {
			continue
		}
		var start, stop uint64
		for _, e := range g.Kallsyms(t) {
			switch {
			case e.Kind != testutil.SymVmlinux:
			case e.Name == "__start_BTF":
				start = e.Addr
			case e.Name == "__stop_BTF":
				stop = e.Addr
			}
		}
		if start == 0 || stop == 0 {
			continue
		}
		any = true
		t.Run(g.Name, func(t *testing.T) {
			paths, _ := g.DumpPaths(dumps[0])
			d, err := vmcore.Open(paths...)
			require.NoError(t, err)
			defer d.Close()
			k, err := d.Kernel()
			require.NoError(t, err)
			raw, err := readBlob(k, start, stop-start)
			require.NoError(t, err)
			_, total, err := header(raw)
			require.NoError(t, err)
			compareWithCilium(t, raw[:total])
		})
	}
	if !any {
		t.Skip("no corpus dump with BTF symbols")
	}
}

func TestRawErrors(t *testing.T) {
	hdr := []byte{0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 12, 0, 0, 0, 2, 0, 0, 0}
	for _, c := range []struct {
		name string
		typ  []byte
	}{
		{"unknown kind", []byte{0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 0}},
		{"name past strings", []byte{9, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0}},
		{"members past section", []byte{0, 0, 0, 0, 3, 0, 0, 4, 8, 0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := append(append(append([]byte{}, hdr...), c.typ...), 0, 0)
			_, err := ParseBTF(raw, "test")
			require.True(t, errors.Is(err, ErrCorrupt), "%v", err)
			errshape.Require(t, err, "btflayout: test: ", "BTF type 1 at 0x18: ") // one line, naming the type and its offset
		})
	}
}
