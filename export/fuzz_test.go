package export

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// FuzzWriteELF writes symbols decoded from the input (17 bytes each:
// address, size, letter) in each class and byte order, and checks that
// the file is refused with an error or reads back with debug/elf, every
// symbol at its address with its size, each in a section holding it or
// absolute.
func FuzzWriteELF(f *testing.F) {
	seed := func(syms ...symfinder.Symbol) []byte {
		var b []byte
		for _, s := range syms {
			b = binary.LittleEndian.AppendUint64(b, s.Addr)
			b = binary.LittleEndian.AppendUint64(b, s.Size)
			b = append(b, byte(s.Kind))
		}
		return b
	}
	f.Add(seed(testSyms...), uint8(0))
	f.Add(seed(sym("a", 0xc1000000, 0x10, 'T'), sym("b", 0xc1000010, 0, 'd')), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		var syms []symfinder.Symbol
		for i := 0; len(data) >= 17 && i < 256; i++ {
			syms = append(syms, symfinder.Symbol{
				Name: string(rune('a' + i%26)),
				Addr: binary.LittleEndian.Uint64(data), Size: binary.LittleEndian.Uint64(data[8:]), Kind: symfinder.Kind(data[16]),
			})
			data = data[17:]
		}
		tg := Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, elf.EM_X86_64}
		if mode&1 != 0 {
			tg.ByteOrder = binary.BigEndian
		}
		if mode&2 != 0 {
			tg.PtrSize = 4
		}
		var b bytes.Buffer
		if err := WriteELF(&b, tg, syms, nil); err != nil {
			return
		}
		ef, err := elf.NewFile(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("written file does not read back: %v", err)
		}
		got, err := ef.Symbols()
		if err != nil && len(syms) > 0 {
			t.Fatalf("symbols: %v", err)
		}
		if len(got) != len(syms) {
			t.Fatalf("%d symbols read back, %d written", len(got), len(syms))
		}
		for _, s := range got {
			if s.Section == elf.SHN_ABS {
				continue
			}
			sec := ef.Sections[s.Section]
			if s.Value < sec.Addr || s.Value-sec.Addr >= sec.Size {
				t.Fatalf("%s at %#x outside its section %s [%#x, +%#x)", s.Name, s.Value, sec.Name, sec.Addr, sec.Size)
			}
		}
	})
}

// FuzzWriteISF writes the ISF of the BTF blob in the input (as a dump
// would hold it, parsed by cilium/ebpf) with a few symbols, and checks
// that it fails before writing anything (a type that does not decode) or
// writes a JSON document with exactly the schema's five keys, whatever the
// types: cycles, deep typedef chains, odd bitfields, duplicate and empty
// names.
func FuzzWriteISF(f *testing.F) {
	raw, err := isfBuilder(f).Marshal(nil, nil)
	require.NoError(f, err)
	f.Add(raw, false)
	f.Add(raw, true)
	f.Fuzz(func(t *testing.T, raw []byte, big bool) {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
		if err != nil {
			return
		}
		in := &ISF{Producer: "p", Version: "1.0.0", Spec: spec, Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8},
			Banner: []byte("Linux version x\n\x00"), Symbols: testSyms}
		if big {
			in.Target = memory.Target{ByteOrder: binary.BigEndian, PtrSize: 4}
		}
		var b bytes.Buffer
		if _, err := WriteISF(&b, in); err != nil {
			// cilium/ebpf decodes types lazily: a bad one fails in
			// WriteISF, before anything is written.
			if b.Len() != 0 {
				t.Fatalf("%d bytes written before the error %v", b.Len(), err)
			}
			return
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		if len(doc) != 5 || doc["metadata"] == nil || doc["base_types"] == nil || doc["user_types"] == nil || doc["enums"] == nil || doc["symbols"] == nil {
			t.Fatalf("keys: %v", slices.Collect(maps.Keys(doc)))
		}
	})
}
