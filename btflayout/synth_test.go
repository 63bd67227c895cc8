package btflayout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// synth describes a synthetic kernel for the inference and scan tests.
type synth struct {
	bo   binary.ByteOrder
	p    uint64
	gen  memGen
	all  bool // CONFIG_KALLSYMS_ALL: data symbols and __this_module in module symtabs
	tree bool // CONFIG_MODULES_TREE_LOOKUP
	// Per-CPU variables weak in modules (ARCH_NEEDS_WEAK_PER_CPU, s390x):
	// a 'v' symbol in the per-CPU area, outside the module's memory.
	weakPercpu bool
	// 6.14+: struct module_memory { base; bool is_rox; size; [mtn] }.
	isRox bool
	// 7.1+: const u8 *flagstab between crcs and num_syms.
	flagstab bool
	mods     int

	// Offsets in struct module the builder uses (what Infer must find).
	kallsyms, syms, mem, core uint64
	stride, layoutSize        uint64
}

// synthKernel is what build made.
type synthKernel struct {
	mem     *testutil.SparseMemory
	head    uint64
	bases   []uint64 // struct module addresses
	areas   [][2]uint64
	vmapTop uint64 // vmap_area_list
}

const (
	synthHead   = 0x8200_0000
	synthModLo  = 0xa000_0000
	synthVmap   = 0x8300_0000
	synthVAList = 40 // offset of vmap_area.list
)

func (s synth) addr(a uint64) uint64 {
	if s.p == 8 {
		return 0xffffffff_0000_0000 | a
	}
	return a
}

func (s synth) put(m *testutil.SparseMemory, at, v uint64, size uint64) {
	b := make([]byte, size)
	switch size {
	case 4:
		s.bo.PutUint32(b, uint32(v))
	case 8:
		s.bo.PutUint64(b, v)
	case 2:
		s.bo.PutUint16(b, uint16(v))
	}
	m.Write(at, b)
}

func (s synth) ptr(m *testutil.SparseMemory, at, v uint64) { s.put(m, at, v, s.p) }

// withDefaults fills in offsets like those of real kernels.
func (s synth) withDefaults() synth {
	p := s.p
	if s.mods == 0 {
		s.mods = 3
	}
	if s.syms == 0 {
		s.syms = 26 * p
	}
	if s.gen == genMem {
		s.stride = (s.memSize() + 4 + p - 1) &^ (p - 1)
		if s.tree {
			s.stride += 7 * p
		}
		s.mem = 40 * p
		if s.kallsyms == 0 {
			s.kallsyms = s.mem + 7*s.stride + 8*p
		}
	} else if s.gen == genFields {
		s.core = 40 * p
		if s.kallsyms == 0 {
			s.kallsyms = 60 * p // here: module.symtab
		}
	} else {
		s.layoutSize = (p + 16 + p - 1) &^ (p - 1)
		if s.tree {
			s.layoutSize += 7 * p
		}
		s.core = 40 * p
		if s.kallsyms == 0 {
			s.kallsyms = s.core + 2*s.layoutSize + 8*p
		}
	}
	return s
}

// memSize is where module_memory.size is.
func (s synth) memSize() uint64 {
	if s.isRox {
		return s.p + 4
	}
	return s.p
}

// numSyms is where module.num_syms is.
func (s synth) numSyms() uint64 {
	if s.flagstab {
		return s.syms + 3*s.p
	}
	return s.syms + 2*s.p
}

// build lays out s.mods modules on a list at synthHead, and a
// vmap_area_list naming their areas among others.
func (s synth) build(t testing.TB) *synthKernel {
	s = s.withDefaults()
	p := s.p
	m := testutil.NewSparseMemory()
	k := &synthKernel{mem: m, head: s.addr(synthHead)}
	next := s.addr(synthModLo)
	alloc := func(n uint64) uint64 {
		a := next
		next += (n + 4095) &^ 4095
		next += 4096 // guard page
		k.areas = append(k.areas, [2]uint64{a, a + (n+4095)&^4095})
		return a
	}
	es := uint64(24)
	if p == 4 {
		es = 16
	}
	for i := 0; i < s.mods; i++ {
		name := fmt.Sprintf("mod%d", i)
		text := alloc(4096)
		data := alloc(8192)
		ro := alloc(4096)
		base := data + 64
		k.bases = append(k.bases, base)
		m.Write(base, make([]byte, 2048))
		m.Write(base+3*p, []byte(name+"\x00"))
		// Symbols: null, f1 (text, exported), f2 (text), d1 (data), __this_module.
		type sym struct {
			name  string
			value uint64
			typ   byte
		}
		syms := []sym{{"", 0, 0}, {name + "_f1", text + 0x10, 'T'}, {name + "_f2", text + 0x40, 't'}}
		if s.all {
			syms = append(syms, sym{name + "_d1", data + 0x1000, 'd'}, sym{"__this_module", base, 'D'})
		}
		if s.weakPercpu {
			syms = append(syms, sym{name + "_pcpu", s.addr(0x7000_0000) + uint64(i)*0x100, 'v'})
		}
		symtab, strtab, typetab := ro, ro+0x400, ro+0x600
		strs := []byte{0}
		for j, sy := range syms {
			e := symtab + uint64(j)*es
			if j == 0 {
				m.Write(e, make([]byte, es))
				continue
			}
			s.put(m, e, uint64(len(strs)), 4)
			strs = append(append(strs, sy.name...), 0)
			if p == 8 {
				s.put(m, e+8, sy.value, 8)
				m.Write(e+6, []byte{1, 0})
				m.Write(e+4, []byte{sy.typ}) // st_info: the letter before v5.0
			} else {
				s.put(m, e+4, sy.value, 4)
				m.Write(e+14, []byte{1, 0})
				m.Write(e+12, []byte{sy.typ})
			}
			m.Write(typetab+uint64(j), []byte{sy.typ})
		}
		m.Write(typetab, []byte{0})
		m.Write(strtab, strs)
		// The export table: f1, place-relative, names in rodata.
		ksym, kname := ro+0x800, ro+0x900
		m.Write(kname, []byte(name+"_f1\x00"))
		s.put(m, ksym, uint64(uint32(int32(int64(text+0x10-ksym)))), 4)
		s.put(m, ksym+4, uint64(uint32(int32(int64(kname-(ksym+4))))), 4)
		s.put(m, ksym+8, 0, 4)
		s.ptr(m, base+s.syms, ksym)
		s.put(m, base+s.numSyms(), 1, 4)
		if s.flagstab {
			s.ptr(m, base+s.syms+2*p, ro+0xa00) // flagstab: one byte of flags
			m.Write(ro+0xa00, []byte{0})
		}
		if s.gen == genFields {
			// symtab, core_symtab; num_symtab, core_num_syms; strtab, core_strtab.
			at := base + s.kallsyms
			so := (s.kallsyms + 2*p + 8 + p - 1) &^ (p - 1)
			s.ptr(m, at, symtab)
			s.ptr(m, at+p, symtab)
			s.put(m, at+2*p, uint64(len(syms)), 4)
			s.put(m, at+2*p+4, uint64(len(syms)), 4)
			s.ptr(m, base+so, strtab)
			s.ptr(m, base+so+p, strtab)
		} else {
			// kallsyms → core_kallsyms right after it.
			mk := base + s.kallsyms + p
			s.ptr(m, base+s.kallsyms, mk)
			s.ptr(m, mk, symtab)
			s.put(m, mk+p, uint64(len(syms)), 4)
			s.ptr(m, mk+2*p, strtab)
			s.ptr(m, mk+3*p, typetab)
		}
		switch s.gen {
		case genMem:
			regs := [][2]uint64{{text, 4096}, {data, 8192}, {ro, 4096}}
			for r, rg := range regs {
				e := base + s.mem + uint64(r)*s.stride
				s.ptr(m, e, rg[0])
				s.put(m, e+s.memSize(), rg[1], 4)
				if s.isRox && r == 0 {
					m.Write(e+p, []byte{1}) // is_rox: text
				}
				if s.tree {
					s.ptr(m, e+((s.memSize()+4+p-1)&^(p-1)), base)
				}
			}
		case genFields:
			e := base + s.core
			s.ptr(m, e+p, text)
			s.put(m, e+2*p+4, ro+4096-text, 4)
			s.put(m, e+2*p+12, 4096, 4)
		case genLayout:
			// One core block: text, then rodata, then data (here three
			// areas stand for one; the core is [text, data end)).
			e := base + s.core
			s.ptr(m, e, text)
			s.put(m, e+p, ro+4096-text, 4)
			s.put(m, e+p+4, 4096, 4)
			s.put(m, e+p+8, 8192, 4)
			if s.tree {
				s.ptr(m, e+((p+16+p-1)&^(p-1)), base)
			}
		}
	}
	// Link the list: head → mod0 → mod1 → ... → head.
	nodes := []uint64{k.head}
	for _, b := range k.bases {
		nodes = append(nodes, b+p)
	}
	for i, n := range nodes {
		s.ptr(m, n, nodes[(i+1)%len(nodes)])
		s.ptr(m, n+p, nodes[(i+len(nodes)-1)%len(nodes)])
	}
	// vmap_area_list: one unrelated area first, then the module areas.
	k.vmapTop = s.addr(synthVmap)
	areas := append([][2]uint64{{s.addr(0x9000_0000), s.addr(0x9000_1000)}}, k.areas...)
	vnodes := []uint64{k.vmapTop}
	for i, a := range areas {
		va := s.addr(synthVmap + 0x1000 + uint64(i)*0x100)
		s.ptr(m, va, a[0])
		s.ptr(m, va+p, a[1])
		vnodes = append(vnodes, va+synthVAList)
	}
	for i, n := range vnodes {
		s.ptr(m, n, vnodes[(i+1)%len(vnodes)])
		s.ptr(m, n+p, vnodes[(i+len(vnodes)-1)%len(vnodes)])
	}
	return k
}

func (s synth) config(k *synthKernel) InferConfig {
	rel := "6.12.0"
	if s.flagstab {
		rel = "7.2.0"
	} else if s.isRox {
		rel = "6.14.0"
	}
	switch s.gen {
	case genLayout:
		rel = "6.1.0"
	case genFields:
		rel = "4.4.0"
	}
	return InferConfig{Target: memory.Target{ByteOrder: s.bo, PtrSize: int(s.p)}, Release: rel, Head: k.head}
}

var synthCases = []synth{
	{bo: binary.LittleEndian, p: 8, gen: genMem, all: true, tree: true},
	{bo: binary.LittleEndian, p: 8, gen: genMem, all: false, tree: true},
	{bo: binary.BigEndian, p: 8, gen: genMem, all: true, tree: false},
	{bo: binary.BigEndian, p: 8, gen: genMem, all: true, tree: true, weakPercpu: true},
	{bo: binary.LittleEndian, p: 4, gen: genLayout, all: false, tree: true},
	{bo: binary.BigEndian, p: 4, gen: genLayout, all: true, tree: false},
	{bo: binary.BigEndian, p: 4, gen: genMem, all: false, tree: true},
	{bo: binary.LittleEndian, p: 8, gen: genLayout, all: true, tree: true},
	{bo: binary.LittleEndian, p: 8, gen: genFields, all: true},
	{bo: binary.BigEndian, p: 4, gen: genFields, all: false},
	{bo: binary.LittleEndian, p: 8, gen: genMem, all: true, tree: true, isRox: true, flagstab: true},
	{bo: binary.LittleEndian, p: 8, gen: genMem, all: true, tree: false, isRox: true, flagstab: true},
	{bo: binary.LittleEndian, p: 4, gen: genMem, all: false, tree: true, isRox: true, flagstab: true},
	{bo: binary.BigEndian, p: 4, gen: genMem, all: true, tree: false, isRox: true, flagstab: true},
	{bo: binary.LittleEndian, p: 8, gen: genMem, all: true, tree: true, isRox: true},
	{bo: binary.LittleEndian, p: 4, gen: genMem, all: false, tree: true, isRox: true},
}

func (s synth) String() string {
	return fmt.Sprintf("%v/%d-bit/gen%d/all=%v/tree=%v/weakpercpu=%v/isrox=%v/flagstab=%v", s.bo, s.p*8, s.gen, s.all, s.tree, s.weakPercpu, s.isRox, s.flagstab)
}

// TestInferSynthetic infers every offset of synthetic kernels of both
// byte orders and pointer sizes, each generation, with and without
// KALLSYMS_ALL and the module tree.
func TestInferSynthetic(t *testing.T) {
	for _, c := range synthCases {
		t.Run(c.String(), func(t *testing.T) {
			k := c.build(t)
			in, err := Infer(k.mem, c.config(k))
			require.NoError(t, err)
			c = c.withDefaults()
			ptrField := "kallsyms"
			if c.gen == genFields {
				ptrField = "symtab"
			}
			mod, err := in.Struct("module", "state", "list", "name", ptrField, "syms", "num_syms")
			require.NoError(t, err)
			f, _ := mod.Field(ptrField)
			assert.Equal(t, c.kallsyms, f.Offset)
			f, _ = mod.Field("syms")
			assert.Equal(t, c.syms, f.Offset)
			f, _ = mod.Field("num_syms")
			assert.Equal(t, c.numSyms(), f.Offset)
			f, _ = mod.Field("name")
			assert.Equal(t, 3*c.p, f.Offset)
			if c.gen == genFields {
				f, ok := mod.Field("module_core")
				require.True(t, ok)
				assert.Equal(t, c.core+c.p, f.Offset)
				f, _ = mod.Field("strtab")
				assert.Equal(t, (c.kallsyms+2*c.p+8+c.p-1)&^(c.p-1), f.Offset)
				return
			}
			if c.gen == genMem {
				f, ok := mod.Field("mem")
				require.True(t, ok)
				assert.Equal(t, c.mem, f.Offset)
				assert.Equal(t, c.stride, f.ElemSize)
				mm, err := in.Struct("module_memory", "base", "size")
				require.NoError(t, err)
				f, _ = mm.Field("size")
				assert.Equal(t, c.memSize(), f.Offset)
			} else {
				f, ok := mod.Field("core_layout")
				require.True(t, ok)
				assert.Equal(t, c.core, f.Offset)
				f, _ = mod.Field("init_layout")
				assert.Equal(t, c.core+c.layoutSize, f.Offset)
			}
			mk, err := in.Struct("mod_kallsyms", "symtab", "num_symtab", "strtab", "typetab")
			require.NoError(t, err)
			f, _ = mk.Field("strtab")
			assert.Equal(t, 2*c.p, f.Offset)
		})
	}
}

// TestInferHostile: broken lists, lying counts and unterminated names are
// errors, found with bounded work.
func TestInferHostile(t *testing.T) {
	c := synthCases[0]
	cw := c.withDefaults()
	p := c.p
	for _, tc := range []struct {
		name  string
		edit  func(k *synthKernel)
		check func(t *testing.T, err error)
	}{
		{"loop", func(k *synthKernel) {
			c.ptr(k.mem, k.bases[2]+p, k.bases[0]+p) // mod2.next = mod0
		}, func(t *testing.T, err error) { assert.ErrorIs(t, err, ErrCorrupt); errshape.Require(t, err) }},
		{"prev disagrees", func(k *synthKernel) {
			c.ptr(k.mem, k.bases[1]+2*p, k.bases[2]+p)
		}, func(t *testing.T, err error) { inferError(t, err, ListBroken) }},
		{"empty list", func(k *synthKernel) {
			c.ptr(k.mem, k.head, k.head)
			c.ptr(k.mem, k.head+p, k.head)
		}, func(t *testing.T, err error) { assert.ErrorIs(t, err, ErrNotFound) }},
		{"lying num_symtab", func(k *synthKernel) {
			for _, b := range k.bases {
				c.put(k.mem, b+cw.kallsyms+2*p, 0xfffff, 4)
			}
		}, func(t *testing.T, err error) { assert.ErrorIs(t, err, ErrNotFound) }},
		{"strtab without NUL", func(k *synthKernel) {
			for _, b := range k.bases {
				strtab, _ := memPtr(k, c, b+cw.kallsyms+3*p)
				k.mem.Write(strtab+1, make([]byte, 0)) // keep the page
				buf := make([]byte, 4096-0x400-1)
				for i := range buf {
					buf[i] = 'x'
				}
				k.mem.Write(strtab+1, buf)
			}
		}, func(t *testing.T, err error) { assert.ErrorIs(t, err, ErrNotFound) }},
		{"randomized head", func(k *synthKernel) {
			k.mem.Write(k.bases[0]+3*p, []byte{0xff})
		}, func(t *testing.T, err error) { inferError(t, err, Randomized) }},
		{"this_module elsewhere", func(k *synthKernel) {
			// __this_module is the last symbol: give it another value.
			symtab, _ := memPtr(k, c, k.bases[0]+cw.kallsyms+p)
			c.put(k.mem, symtab+4*24+8, 0x1234, 8)
		}, func(t *testing.T, err error) { assert.ErrorIs(t, err, ErrNotFound) }},
		{"ambiguous kallsyms", func(k *synthKernel) {
			// A second pointer at core_kallsyms-2p that also leads to a
			// valid mod_kallsyms cannot arise (it must point at the next
			// member), so make the regions ambiguous instead: no tree
			// and a second copy of mem[] right after the first.
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.check == nil {
				t.Skip("covered by TestInferAmbiguous")
			}
			k := c.build(t)
			tc.edit(k)
			_, err := Infer(k.mem, c.config(k))
			require.Error(t, err)
			tc.check(t, err)
		})
	}
}

func memPtr(k *synthKernel, c synth, at uint64) (uint64, error) {
	b := make([]byte, c.p)
	if _, err := k.mem.ReadAt(b, at); err != nil {
		return 0, err
	}
	if c.p == 4 {
		return uint64(c.bo.Uint32(b)), nil
	}
	return c.bo.Uint64(b), nil
}

// TestInferAmbiguous: two offsets that both fit are an error, not a pick.
func TestInferAmbiguous(t *testing.T) {
	c := synth{bo: binary.LittleEndian, p: 8, gen: genMem, all: true, tree: false}
	k := c.build(t)
	cw := c.withDefaults()
	// Copy mem[] (7 × 16 bytes) to a second place in every struct module.
	for _, b := range k.bases {
		buf := make([]byte, 7*cw.stride)
		_, err := k.mem.ReadAt(buf, b+cw.mem)
		require.NoError(t, err)
		k.mem.Write(b+cw.kallsyms+5*c.p+16, buf)
	}
	_, err := Infer(k.mem, c.config(k))
	require.Error(t, err)
	inferError(t, err, Ambiguous)
}

// inferError checks an error of Infer: corruption, an *InferError of the
// problem, in one line naming where (errshape: its Addr, when it has one).
func inferError(t *testing.T, err error, problem InferProblem) {
	t.Helper()
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	var ie *InferError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, problem, ie.Problem, "%v", err)
	if problem != Ambiguous {
		assert.NotZero(t, ie.Addr, "names the node or struct module")
	}
	errshape.Require(t, err)
}

// TestFindModuleListSynthetic finds the list head by scanning the module
// areas on vmap_area_list, for each synthetic kernel.
func TestFindModuleListSynthetic(t *testing.T) {
	for _, c := range synthCases {
		t.Run(c.String(), func(t *testing.T) {
			k := c.build(t)
			cfg := ModuleScanConfig{InferConfig: c.config(k), VmapAreaList: k.vmapTop, VAStart: 0, VAList: synthVAList,
				Ranges: [][2]uint64{{c.addr(synthModLo), c.addr(synthModLo + 1<<28)}}}
			cfg.Head = 0
			head, in, err := FindModuleList(k.mem, cfg)
			require.NoError(t, err)
			assert.Equal(t, k.head, head)
			require.NotNil(t, in)
		})
	}
}

// TestFindModuleListHostile: a looped vmap_area_list, no module areas and
// a module list without a head are errors.
func TestFindModuleListHostile(t *testing.T) {
	c := synthCases[0]
	k := c.build(t)
	cfg := ModuleScanConfig{InferConfig: c.config(k), VmapAreaList: k.vmapTop, VAList: synthVAList,
		Ranges: [][2]uint64{{c.addr(synthModLo), c.addr(synthModLo + 1<<28)}}}
	// No area in range.
	bad := cfg
	bad.Ranges = [][2]uint64{{1, 2}}
	_, _, err := FindModuleList(k.mem, bad)
	assert.ErrorIs(t, err, ErrNotFound)
	// No target: an error, not a guess, for the scan and for Infer.
	bad = cfg
	bad.Target = memory.Target{}
	_, _, err = FindModuleList(k.mem, bad)
	assert.ErrorIs(t, err, memory.ErrUnknownTarget)
	_, err = Infer(k.mem, bad.InferConfig)
	assert.ErrorIs(t, err, memory.ErrUnknownTarget)
	// No vmap_area_list.
	bad = cfg
	bad.VmapAreaList = 0
	_, _, err = FindModuleList(k.mem, bad)
	assert.ErrorIs(t, err, ErrNotFound)
	// The list of modules closed on itself, without the head: every node
	// is a module.
	k2 := c.build(t)
	c.ptr(k2.mem, k2.bases[2]+c.p, k2.bases[0]+c.p)
	c.ptr(k2.mem, k2.bases[0]+2*c.p, k2.bases[2]+c.p)
	_, _, err = FindModuleList(k2.mem, cfg)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt), "%v", err)
	// A looped vmap_area_list.
	k3 := c.build(t)
	first, err := memPtr(k3, c, k3.vmapTop)
	require.NoError(t, err)
	second, err := memPtr(k3, c, first)
	require.NoError(t, err)
	c.ptr(k3.mem, second, first)
	_, _, err = FindModuleList(k3.mem, cfg)
	assert.ErrorIs(t, err, ErrCorrupt)
}

// sparseMapped lists the written pages of a sparse memory as mapped runs,
// as page tables would.
func sparseMapped(m *testutil.SparseMemory) func(lo, hi uint64, yield func(start, end uint64) bool) error {
	return func(lo, hi uint64, yield func(start, end uint64) bool) error {
		var pages []uint64
		for a := range m.Pages {
			if a >= lo && a < hi {
				pages = append(pages, a)
			}
		}
		slices.Sort(pages)
		for i := 0; i < len(pages); {
			j := i + 1
			for j < len(pages) && pages[j] == pages[j-1]+4096 {
				j++
			}
			if !yield(pages[i], pages[j-1]+4096) {
				return nil
			}
			i = j
		}
		return nil
	}
}

// TestFindModuleListPageTables finds the head through the mapped pages of
// the module range (kernels without vmap_area_list), skipping excluded
// ranges and the run at the linear map's base.
func TestFindModuleListPageTables(t *testing.T) {
	for _, c := range synthCases {
		t.Run(c.String(), func(t *testing.T) {
			k := c.build(t)
			cfg := ModuleScanConfig{InferConfig: c.config(k), Mapped: sparseMapped(k.mem),
				Ranges: [][2]uint64{{c.addr(synthModLo), c.addr(synthModLo + 1<<28)}}}
			head, _, err := FindModuleList(k.mem, cfg)
			require.NoError(t, err)
			assert.Equal(t, k.head, head)
			// With the module areas excluded, or taken for the linear map,
			// nothing is found.
			ex := cfg
			ex.Exclude = [][2]uint64{cfg.Ranges[0]}
			_, _, err = FindModuleList(k.mem, ex)
			assert.ErrorIs(t, err, ErrNotFound)
			// The first module's text run taken for the linear map: the
			// struct modules are in other runs, so the head is found.
			dm := cfg
			dm.DirectMap = k.areas[0][0]
			head, _, err = FindModuleList(k.mem, dm)
			require.NoError(t, err, "only the run at the linear map's base is skipped")
			assert.Equal(t, k.head, head)
		})
	}
}

// holeCounter counts the reads that fail in [lo, hi).
type holeCounter struct {
	m      memory.Reader
	lo, hi uint64
	n      int
}

func (h *holeCounter) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := h.m.ReadAt(p, addr)
	if err != nil && addr >= h.lo && addr < h.hi {
		h.n++
	}
	return n, err
}

// TestFindModuleListPageSize: a module area whose first 64 KiB page is
// not in the dump (a ppc64 kernel with 64 KiB pages) is scanned past that
// page in one step when the Target names the page size, and found either
// way.
func TestFindModuleListPageSize(t *testing.T) {
	c := synthCases[0]
	k := c.build(t)
	const page = 64 << 10
	runs := sparseMapped(k.mem)
	// The first run starts one absent 64 KiB page earlier.
	mapped := func(lo, hi uint64, yield func(start, end uint64) bool) error {
		first := true
		return runs(lo, hi, func(s, e uint64) bool {
			if first {
				first = false
				s = (s - page) &^ (page - 1)
			}
			return yield(s, e)
		})
	}
	var holeLo uint64
	require.NoError(t, runs(c.addr(synthModLo), c.addr(synthModLo+1<<28), func(s, _ uint64) bool {
		holeLo = (s - page) &^ (page - 1)
		return false
	}))
	for _, ps := range []int{0, page} {
		hc := &holeCounter{m: k.mem, lo: holeLo, hi: holeLo + page}
		cfg := ModuleScanConfig{InferConfig: c.config(k), Mapped: mapped,
			Ranges: [][2]uint64{{c.addr(synthModLo), c.addr(synthModLo + 1<<28)}}}
		cfg.Target.PageSize = ps
		head, _, err := FindModuleList(hc, cfg)
		require.NoError(t, err, "page size %d", ps)
		assert.Equal(t, k.head, head)
		t.Logf("page size %d: %d failed reads in the absent page at %#x", ps, hc.n, holeLo)
		if ps == page {
			assert.LessOrEqual(t, hc.n, 2, "reads that failed in the absent 64 KiB page")
		} else {
			assert.Greater(t, hc.n, 2, "4 KiB steps through the absent page")
		}
	}
}
