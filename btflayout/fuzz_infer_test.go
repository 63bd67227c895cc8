package btflayout

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// flatten packs the pages of a sparse memory, in address order, into one
// buffer for testutil.FuzzPatch, and returns the page addresses.
func flattenPages(m *testutil.SparseMemory) ([]byte, []uint64) {
	var addrs []uint64
	for a := range m.Pages {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var out []byte
	for _, a := range addrs {
		out = append(out, m.Pages[a]...)
	}
	return out, addrs
}

func unflattenPages(b []byte, addrs []uint64) *testutil.SparseMemory {
	m := testutil.NewSparseMemory()
	for i, a := range addrs {
		if uint64(len(b)) < uint64(i+1)*4096 {
			break // cut off: the rest of memory is absent
		}
		m.Write(a, b[i*4096:(i+1)*4096])
	}
	return m
}

// FuzzInfer feeds hostile kernel memory to Infer and FindModuleList: the
// input edits (testutil.FuzzPatch) the pages of a well-formed synthetic
// two-module kernel (world, modulo 3: 64-bit little-endian v6.4+, 32-bit
// big-endian v4.5–v6.3, 64-bit little-endian before v4.5), whose list, struct modules,
// mod_kallsyms, symtabs, strtabs and vmap_area_list are all in reach; a
// cut drops pages from the end. Both must end with a result or an error,
// never panic or hang; an error means a nil result, and a result answers
// for struct module.
func FuzzInfer(f *testing.F) {
	cases := []synth{
		{bo: binary.LittleEndian, p: 8, gen: genMem, all: true, tree: true, mods: 2},
		{bo: binary.BigEndian, p: 4, gen: genLayout, all: false, tree: true, mods: 2},
		{bo: binary.LittleEndian, p: 8, gen: genFields, all: true, mods: 2},
	}
	type world struct {
		c     synth
		k     *synthKernel
		flat  []byte
		addrs []uint64
	}
	var worlds []world
	for _, c := range cases {
		k := c.build(f)
		if _, err := Infer(k.mem, c.config(k)); err != nil {
			f.Fatalf("world %v: %v", c, err)
		}
		flat, addrs := flattenPages(k.mem)
		worlds = append(worlds, world{c, k, flat, addrs})
	}
	f.Add(uint8(0), []byte(nil))
	f.Add(uint8(1), []byte(nil))
	f.Add(uint8(2), []byte(nil))
	f.Add(uint8(0), []byte{0, 0, 0x10, 0x08, 4, 0xff, 0xff, 0xff, 0x7f})
	f.Add(uint8(1), []byte{0x10, 0x00})
	f.Fuzz(func(t *testing.T, world uint8, edits []byte) {
		w := worlds[int(world)%len(worlds)]
		m := unflattenPages(testutil.FuzzPatch(w.flat, edits[:min(len(edits), 128)]), w.addrs)
		in, err := Infer(m, w.c.config(w.k))
		if (in == nil) == (err == nil) {
			t.Fatalf("Infer: result %v with error %v", in, err)
		}
		if in != nil {
			if _, err := in.Struct("module", "list", "name", "state"); err != nil {
				t.Fatal(err)
			}
		}
		cfg := ModuleScanConfig{InferConfig: w.c.config(w.k), VmapAreaList: w.k.vmapTop, VAList: synthVAList,
			Ranges: [][2]uint64{{w.c.addr(synthModLo), w.c.addr(synthModLo + 1<<28)}}}
		head, in, err := FindModuleList(m, cfg)
		if (in == nil) == (err == nil) || err != nil && head != 0 {
			t.Fatalf("FindModuleList: head %#x, result %v, error %v", head, in, err)
		}
	})
}

// synthBTF is a minimal vmlinux-like BTF blob holding struct module.
func synthBTF(tb testing.TB, bo binary.ByteOrder) []byte {
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	uint := &btf.Int{Name: "unsigned int", Size: 4}
	mod := &btf.Struct{Name: "module", Size: 64, Members: []btf.Member{
		{Name: "state", Type: uint, Offset: 0},
		{Name: "name", Type: &btf.Array{Type: char, Index: uint, Nelems: 56}, Offset: 64},
	}}
	b, err := btf.NewBuilder([]btf.Type{mod}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := b.Marshal(nil, &btf.MarshalOptions{Order: bo})
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// FuzzScanBTF feeds ScanBTF a read-only data window of 16 KiB holding
// junk, a decoy header and a real BTF blob with struct module, edited by
// the input (testutil.FuzzPatch). ScanBTF must end with a blob that holds
// struct module, or an error.
func FuzzScanBTF(f *testing.F) {
	const lo = 0xffffffff81000000
	raw := synthBTF(f, binary.LittleEndian)
	window := make([]byte, 16<<10)
	for i := range window {
		window[i] = byte(i * 7)
	}
	// A decoy: a consistent-looking header whose blob does not parse.
	copy(window[0x100:], raw[:24])
	copy(window[0x2000:], raw)
	m := testutil.NewSparseMemory()
	m.Write(lo, window)
	if _, res, err := ScanBTF(m, lo, lo+uint64(len(window))); err != nil || res.Addr != lo+0x2000 {
		f.Fatalf("world: %v at %#x", err, res.Addr)
	}
	f.Add([]byte(nil))
	f.Add([]byte{0, 0, 0x20, 0x0c, 4, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, edits []byte) {
		m := testutil.NewSparseMemory()
		w := testutil.FuzzPatch(window, edits[:min(len(edits), 128)])
		m.Write(lo, w)
		b, _, err := ScanBTF(m, lo, lo+uint64(len(window)))
		if (b == nil) == (err == nil) {
			t.Fatalf("result %v with error %v", b, err)
		}
		if b != nil {
			if _, err := b.Struct("module", "name"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
