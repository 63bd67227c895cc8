package bpfsyms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// fakeMem is sparse synthetic kernel memory.
type fakeMem = testutil.SparseMemory

// le64 is the target of the synthetic kernels.
var le64 = memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}

func newFakeMem() *fakeMem { return testutil.NewSparseMemory() }

// fakeLayout is a btflayout.Source over hand-written structs.
type fakeLayout map[string]*btflayout.Struct

func (l fakeLayout) Describe() string { return "synthetic layout" }

func (l fakeLayout) Struct(name string, need ...string) (*btflayout.Struct, error) {
	s, ok := l[name]
	if !ok || !s.Has(need...) {
		return nil, fmt.Errorf("btflayout: %s: struct %s: %w", l.Describe(), name, btflayout.ErrNotFound)
	}
	return s, nil
}

func (l fakeLayout) Enum(name string) (map[string]int64, error) {
	return nil, fmt.Errorf("btflayout: enum %s: %w", name, btflayout.ErrNotFound)
}

func f(name string, off, size uint64) btflayout.Field {
	return btflayout.Field{Name: name, Offset: off, Size: size, Kind: btflayout.KindInt}
}

func ptr(name string, off uint64) btflayout.Field {
	return btflayout.Field{Name: name, Offset: off, Size: 8, Kind: btflayout.KindPointer}
}

func arr(name string, off, n uint64) btflayout.Field {
	return btflayout.Field{Name: name, Offset: off, Size: n, Kind: btflayout.KindArray, Count: n, ElemSize: 1}
}

// synthName is KSYM_NAME_LEN of the synthetic bpf_ksym.
const synthName = 32

// synthLayout has the v5.7+ bpf_ksym, ftrace and kprobes structs.
var synthLayout = fakeLayout{
	"list_head":         btflayout.NewStruct("list_head", 16, ptr("next", 0), ptr("prev", 8)),
	"bpf_ksym":          btflayout.NewStruct("bpf_ksym", 72, f("start", 0, 8), f("end", 8, 8), arr("name", 16, synthName), f("lnode", 48, 16), f("prog", 64, 1)),
	"ftrace_ops":        btflayout.NewStruct("ftrace_ops", 40, f("trampoline", 0, 8), f("trampoline_size", 8, 8), f("list", 16, 16)),
	"ftrace_mod_map":    btflayout.NewStruct("ftrace_mod_map", 48, f("list", 0, 16), ptr("mod", 16), f("funcs", 24, 16), f("num_funcs", 40, 4)),
	"ftrace_mod_func":   btflayout.NewStruct("ftrace_mod_func", 40, f("list", 0, 16), ptr("name", 16), f("ip", 24, 8), f("size", 32, 4)),
	"module":            btflayout.NewStruct("module", 64, arr("name", 8, 56)),
	"kprobe_insn_cache": btflayout.NewStruct("kprobe_insn_cache", 24, ptr("sym", 0), f("pages", 8, 16)),
	"kprobe_insn_page":  btflayout.NewStruct("kprobe_insn_page", 24, f("list", 0, 16), ptr("insns", 16)),
}

// oldLayout has the v4.11–v5.6 bpf_prog_aux instead of bpf_ksym.
var oldLayout = fakeLayout{
	"list_head":         synthLayout["list_head"],
	"bpf_prog_aux":      btflayout.NewStruct("bpf_prog_aux", 64, f("ksym_lnode", 0, 16), ptr("prog", 16), arr("name", 24, 16), ptr("func_info", 40), f("func_info_cnt", 48, 4), f("func_idx", 52, 4), ptr("btf", 56)),
	"bpf_prog":          btflayout.NewStruct("bpf_prog", 16, arr("tag", 0, 8), ptr("bpf_func", 8)),
	"bpf_binary_header": btflayout.NewStruct("bpf_binary_header", 8, f("pages", 0, 4)),
	"btf":               btflayout.NewStruct("btf", 24, ptr("types", 0), ptr("strings", 8), f("nr_types", 16, 4)),
	"bpf_func_info":     btflayout.NewStruct("bpf_func_info", 8, f("insn_off", 0, 4), f("type_id", 4, 4)),
	"ftrace_ops":        synthLayout["ftrace_ops"],
	"ftrace_mod_map":    synthLayout["ftrace_mod_map"],
	"ftrace_mod_func":   synthLayout["ftrace_mod_func"],
	"module":            synthLayout["module"],
	"kprobe_insn_cache": synthLayout["kprobe_insn_cache"],
	"kprobe_insn_page":  synthLayout["kprobe_insn_page"],
}

// kbuilder lays synthetic kernel data out in a fake memory.
type kbuilder struct {
	mem  *fakeMem
	next uint64
	syms map[string]uint64
	// page is the PAGE_SIZE oldProg lays a bpf_binary_header out in; 0
	// means 4096. FuzzWalk uses a small one to keep its seed small.
	page uint64
}

const synthBase = 0xffffffffc0000000

func newKBuilder() *kbuilder {
	return &kbuilder{mem: newFakeMem(), next: synthBase, syms: map[string]uint64{}}
}

func (b *kbuilder) alloc(n uint64) uint64 {
	a := b.next
	b.next += (n + 15) &^ 15
	b.mem.Write(a, make([]byte, n))
	return a
}

func (b *kbuilder) str(s string) uint64 {
	a := b.alloc(uint64(len(s)) + 1)
	b.mem.Write(a, []byte(s))
	return a
}

// head allocates an empty list_head named sym.
func (b *kbuilder) head(sym string) uint64 {
	h := b.alloc(16)
	b.mem.PutU64(h, h)
	b.mem.PutU64(h+8, h)
	if sym != "" {
		b.syms[sym] = h
	}
	return h
}

// link appends node to the list at head.
func (b *kbuilder) link(head, node uint64) {
	last, _ := memory.Uint64(b.mem, binary.LittleEndian, head+8)
	b.mem.PutU64(last, node)
	b.mem.PutU64(node, head)
	b.mem.PutU64(node+8, last)
	b.mem.PutU64(head+8, node)
}

func (b *kbuilder) symbols() Symbols {
	return func(n string) (uint64, bool) { a, ok := b.syms[n]; return a, ok }
}

// ksym appends a struct bpf_ksym to bpf_kallsyms.
func (b *kbuilder) ksym(start, end uint64, name []byte) uint64 {
	h, ok := b.syms["bpf_kallsyms"]
	if !ok {
		h = b.head("bpf_kallsyms")
	}
	k := b.alloc(72)
	b.mem.PutU64(k, start)
	b.mem.PutU64(k+8, end)
	b.mem.Write(k+16, name)
	b.link(h, k+48)
	return k
}

func lines(t testing.TB, s *Set) []string {
	var out []string
	_ = s.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
		out = append(out, fmt.Sprintf("%x %c %s [%s] %d", sym.Addr, sym.Kind, sym.Name, sym.Module, sym.Size))
		return true
	})
	return out
}

func lookup(s *Set, addr uint64) string {
	var out []string
	_ = s.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: addr}, func(sym symfinder.Symbol) bool {
		out = append(out, sym.Format(addr))
		return true
	})
	return strings.Join(out, ",")
}

func TestBPF(t *testing.T) {
	b := newKBuilder()
	b.ksym(0xffffffffc1000000, 0xffffffffc1000040, []byte("bpf_prog_0123456789abcdef_one"))
	b.ksym(0xffffffffc1000040, 0xffffffffc1000050, []byte("bpf_trampoline_6442450944"))
	b.ksym(0xffffffffc1001000, 0xffffffffc1001000, []byte("bpf_dispatcher_xdp")) // empty range
	b.ksym(0xffffffffc1002000, 0xffffffffc1002010, nil)                          // empty name: not printed
	s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ffffffffc1000000 t bpf_prog_0123456789abcdef_one [bpf] 64",
		"ffffffffc1000040 t bpf_trampoline_6442450944 [bpf] 16",
		"ffffffffc1001000 t bpf_dispatcher_xdp [bpf] 0",
	}, lines(t, s))
	assert.Equal(t, "bpf_prog_0123456789abcdef_one+0x3f/0x40 [bpf]", lookup(s, 0xffffffffc100003f))
	assert.Equal(t, "bpf_trampoline_6442450944+0x0/0x10 [bpf]", lookup(s, 0xffffffffc1000040))
	assert.Equal(t, "", lookup(s, 0xffffffffc1000050), "just past the end")
	assert.Equal(t, "", lookup(s, 0xffffffffc0fffff0))
	assert.Equal(t, "bpf_dispatcher_xdp+0x0/0x0 [bpf]", lookup(s, 0xffffffffc1001000))
	var byName []symfinder.Symbol
	_ = s.Find(symfinder.Query{Kind: symfinder.ByName, Name: "bpf_trampoline_6442450944"}, func(sym symfinder.Symbol) bool {
		byName = append(byName, sym)
		return true
	})
	require.Len(t, byName, 1)
	assert.Equal(t, uint64(0xffffffffc1000040), byName[0].Addr)
	assert.Equal(t, FinderBPF, s.Name())
}

func TestBPFHostile(t *testing.T) {
	long := []byte(strings.Repeat("x", synthName)) // fills the array: no NUL
	t.Run("bad entries", func(t *testing.T) {
		b := newKBuilder()
		b.ksym(0x2000, 0x1000, []byte("backwards"))
		b.ksym(0x1000, 0x1000+MaxRange+1, []byte("huge"))
		b.ksym(0x1000, 0x1010, long)
		b.ksym(0x3000, 0x3010, []byte("good"))
		s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
		require.NotNil(t, s)
		require.ErrorIs(t, err, ErrCorrupt)
		var ee *EntryError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, "bpf_kallsyms", ee.List)
		assert.Equal(t, []string{"3000 t good [bpf] 16"}, lines(t, s))
		assert.ErrorIs(t, s.Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { return true }), ErrCorrupt)
	})
	t.Run("cycle", func(t *testing.T) {
		b := newKBuilder()
		k1 := b.ksym(0x1000, 0x1010, []byte("a"))
		k2 := b.ksym(0x2000, 0x2010, []byte("b"))
		// b's next points back at a, never at the head.
		b.mem.PutU64(k2+48, k1+48)
		s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
		var we *WalkError
		require.ErrorAs(t, err, &we)
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Equal(t, k1+48, we.Addr)
		assert.Len(t, lines(t, s), 2)
	})
	t.Run("self loop", func(t *testing.T) {
		b := newKBuilder()
		k := b.ksym(0x1000, 0x1010, []byte("a"))
		b.mem.PutU64(k+48, k+48)
		s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Len(t, lines(t, s), 1)
	})
	for name, wild := range map[string]uint64{"unmapped": 0xffff888000000000, "null": 0, "misaligned": synthBase + 3, "below offset": 8} {
		t.Run("wild "+name, func(t *testing.T) {
			b := newKBuilder()
			k := b.ksym(0x1000, 0x1010, []byte("a"))
			b.mem.PutU64(k+48, wild)
			s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
			var we *WalkError
			require.ErrorAs(t, err, &we)
			assert.Equal(t, wild, we.Addr)
			assert.Len(t, lines(t, s), 1)
			if name == "unmapped" {
				assert.ErrorIs(t, err, memory.ErrNotSaved)
			} else {
				assert.ErrorIs(t, err, ErrCorrupt)
			}
		})
	}
	t.Run("unreadable head", func(t *testing.T) {
		s, err := LoadBPF(newFakeMem(), func(string) (uint64, bool) { return synthBase, true }, Options{Target: le64, Layout: synthLayout})
		assert.Nil(t, s)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
	})
}

func TestMissingInfo(t *testing.T) {
	b := newKBuilder()
	b.head("bpf_kallsyms")
	none := func(string) (uint64, bool) { return 0, false }
	for name, load := range map[string]func(memory.Reader, Symbols, Options) (*Set, error){"bpf": LoadBPF, "ftrace": LoadFtrace, "kprobes": LoadKprobes} {
		t.Run(name+"/symbol", func(t *testing.T) {
			s, err := load(b.mem, none, Options{Target: le64, Layout: synthLayout})
			assert.Nil(t, s)
			assert.ErrorIs(t, err, ErrMissingInfo)
			assert.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo, "one vocabulary for absence")
		})
		t.Run(name+"/layout", func(t *testing.T) {
			// A list with an entry: reading it needs the layouts.
			b := newKBuilder()
			b.ksym(0x1000, 0x1010, []byte("a"))
			all := func(string) (uint64, bool) { return b.syms["bpf_kallsyms"], true }
			s, err := load(b.mem, all, Options{Target: le64, Layout: fakeLayout{}})
			assert.Nil(t, s)
			assert.ErrorIs(t, err, ErrMissingInfo)
			assert.ErrorIs(t, err, btflayout.ErrNotFound)
		})
		t.Run(name+"/empty list, no layouts", func(t *testing.T) {
			if name == "kprobes" {
				t.Skip("a kprobes cache is a struct around its list: its layout is needed to find the list")
			}
			all := func(string) (uint64, bool) { return b.syms["bpf_kallsyms"], true }
			s, err := load(b.mem, all, Options{Target: le64, Layout: fakeLayout{}})
			require.NoError(t, err)
			assert.Zero(t, s.Len())
		})
		t.Run(name+"/no BTF", func(t *testing.T) {
			s, err := load(b.mem, none, Options{Target: le64})
			assert.Nil(t, s)
			assert.ErrorIs(t, err, btflayout.ErrNoBTF)
		})
	}
}

// oldProg adds a pre-v5.7 program: its bpf_prog_aux, bpf_prog and a JIT
// image of pages pages whose entry is off bytes in.
func (b *kbuilder) oldProg(tag uint64, name string, pages uint32, off uint64, funcName string) {
	h, ok := b.syms["bpf_kallsyms"]
	if !ok {
		h = b.head("bpf_kallsyms")
	}
	page := b.page
	if page == 0 {
		page = 4096
	}
	b.next = (b.next + page - 1) &^ (page - 1)
	hdr := b.alloc(uint64(pages) * page)
	b.mem.PutU32(hdr, pages)
	prog := b.alloc(16)
	var tb [8]byte
	binary.BigEndian.PutUint64(tb[:], tag)
	b.mem.Write(prog, tb[:])
	b.mem.PutU64(prog+8, hdr+off)
	aux := b.alloc(64)
	b.mem.PutU64(aux+16, prog)
	b.mem.Write(aux+24, []byte(name))
	if funcName != "" {
		strs := b.str("\x00int\x00" + funcName)
		t1, t2 := b.alloc(12), b.alloc(12)
		b.mem.PutU32(t2, 5) // name_off of funcName
		types := b.alloc(24)
		b.mem.PutU64(types+8, t1)
		b.mem.PutU64(types+16, t2)
		btf := b.alloc(24)
		b.mem.PutU64(btf, types)
		b.mem.PutU64(btf+8, strs)
		b.mem.PutU32(btf+16, 2)
		fi := b.alloc(16)
		b.mem.PutU32(fi+8+4, 2) // func_info[1].type_id
		b.mem.PutU64(aux+40, fi)
		b.mem.PutU32(aux+48, 2) // func_info_cnt
		b.mem.PutU32(aux+52, 1) // func_idx
		b.mem.PutU64(aux+56, btf)
	}
	b.link(h, aux)
}

func TestBPFOldLayout(t *testing.T) {
	b := newKBuilder()
	b.oldProg(0x0123456789abcdef, "plain", 1, 0x40, "")
	b.oldProg(0xfedcba9876543210, "aux_name", 2, 0x7c, "btf_func_name")
	b.oldProg(0x1111111111111111, "", 1, 0x10, "")
	s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: oldLayout})
	require.NoError(t, err)
	got := lines(t, s)
	require.Len(t, got, 3)
	assert.Contains(t, got[0], " t bpf_prog_0123456789abcdef_plain [bpf] 4032")
	assert.Contains(t, got[1], " t bpf_prog_fedcba9876543210_btf_func_name [bpf] 8068")
	assert.Contains(t, got[2], " t bpf_prog_1111111111111111 [bpf] 4080")
}

func TestFtrace(t *testing.T) {
	b := newKBuilder()
	maps := b.head("ftrace_mod_maps")
	tl := b.head("ftrace_ops_trampoline_list")
	addMap := func(mod string, funcs ...string) {
		m := b.alloc(64)
		b.mem.Write(m+8, []byte(mod))
		mm := b.alloc(48)
		b.mem.PutU64(mm+16, m)
		b.mem.PutU64(mm+24, mm+24)
		b.mem.PutU64(mm+32, mm+24)
		b.mem.PutU32(mm+40, uint32(len(funcs)))
		for i, fn := range funcs {
			mf := b.alloc(40)
			b.mem.PutU64(mf+16, b.str(fn))
			b.mem.PutU64(mf+24, 0xffffffffc2000000+uint64(i)*0x100)
			b.mem.PutU32(mf+32, 0x80)
			b.link(mm+24, mf)
		}
		b.link(maps, mm)
	}
	addMap("ext4", "init_a", "init_b", "init_c")
	addMap("xfs", "xfs_init")
	addOps := func(tramp, size uint64) {
		o := b.alloc(40)
		b.mem.PutU64(o, tramp)
		b.mem.PutU64(o+8, size)
		b.link(tl, o+16)
	}
	addOps(0xffffffffc3000000, 0xa6)
	addOps(0, 0) // no trampoline: not listed
	addOps(0xffffffffc3001000, 0xcf)
	s, err := LoadFtrace(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
	require.NoError(t, err)
	assert.Equal(t, []string{
		// The kernel's off-by-one: the first function twice, the last never.
		"ffffffffc2000000 T init_a [ext4] 128",
		"ffffffffc2000000 T init_a [ext4] 128",
		"ffffffffc2000100 T init_b [ext4] 128",
		"ffffffffc2000000 T xfs_init [xfs] 128",
		"ffffffffc3000000 t ftrace_trampoline [__builtin__ftrace] 166",
		"ffffffffc3001000 t ftrace_trampoline [__builtin__ftrace] 207",
	}, lines(t, s))
	assert.Equal(t, "init_c+0x10/0x80 [ext4]", lookup(s, 0xffffffffc2000210))
	assert.Equal(t, "ftrace_trampoline+0xa5/0xa6 [__builtin__ftrace]", lookup(s, 0xffffffffc30000a5))
	assert.Equal(t, "", lookup(s, 0xffffffffc30000a6))
	require.Len(t, s.Indexes(), 3)
	assert.Equal(t, "ftrace:ext4", s.Indexes()[0].Name())

	t.Run("without ftrace_mod_maps", func(t *testing.T) {
		delete(b.syms, "ftrace_mod_maps")
		s, err := LoadFtrace(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
		require.NoError(t, err)
		assert.Len(t, lines(t, s), 2)
	})
}

func TestKprobes(t *testing.T) {
	b := newKBuilder()
	addCache := func(sym, name string, insns ...uint64) {
		c := b.alloc(24)
		b.mem.PutU64(c, b.str(name))
		b.mem.PutU64(c+8, c+8)
		b.mem.PutU64(c+16, c+8)
		b.syms[sym] = c
		for _, in := range insns {
			p := b.alloc(24)
			b.mem.PutU64(p+16, in)
			b.link(c+8, p)
		}
	}
	addCache("kprobe_insn_slots", "kprobe_insn_page", 0xffffffffc4000000, 0xffffffffc4002000)
	addCache("kprobe_optinsn_slots", "kprobe_optinsn_page", 0xffffffffc4004000)
	s, err := LoadKprobes(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ffffffffc4000000 t kprobe_insn_page [__builtin__kprobes] 4096",
		"ffffffffc4002000 t kprobe_insn_page [__builtin__kprobes] 4096",
		"ffffffffc4004000 t kprobe_optinsn_page [__builtin__kprobes] 4096",
	}, lines(t, s))
	assert.Equal(t, "kprobe_insn_page+0xfff/0x1000 [__builtin__kprobes]", lookup(s, 0xffffffffc4000fff))
	assert.Equal(t, "", lookup(s, 0xffffffffc4001000))

	delete(b.syms, "kprobe_optinsn_slots") // CONFIG_OPTPROBES off
	s, err = LoadKprobes(b.mem, b.symbols(), Options{Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 16384}, Layout: synthLayout})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ffffffffc4000000 t kprobe_insn_page [__builtin__kprobes] 16384",
		"ffffffffc4002000 t kprobe_insn_page [__builtin__kprobes] 16384",
	}, lines(t, s))
}

// TestIssue27AmbiguousEmpty: a head found through code where several
// candidates validate is no failure when each holds an empty list (the
// output cannot differ), as on Debian's i386 and armhf 6.1 kernels, whose
// kprobe_get_kallsym refers to two addresses that each validate as an
// empty kprobe_insn_slots; one candidate with entries is still ambiguous.
func TestIssue27AmbiguousEmpty(t *testing.T) {
	const stext, fn = 0xffffffff81000000, 0xffffffff81000100
	build := func(pages int) (*kbuilder, Options) {
		b := newKBuilder()
		b.syms["_stext"], b.syms["_etext"] = stext, synthBase
		var code []byte
		for i := range 2 {
			c := b.alloc(24)
			b.mem.PutU64(c, b.str("kprobe_insn_page"))
			b.mem.PutU64(c+8, c+8)
			b.mem.PutU64(c+16, c+8)
			if i == 1 {
				for range pages {
					p := b.alloc(24)
					b.mem.PutU64(p+16, 0xffffffffc4000000)
					b.link(c+8, p)
				}
			}
			code = binary.LittleEndian.AppendUint64(code, c)
		}
		b.mem.Write(fn, code)
		opt := Options{Target: le64, Layout: synthLayout, Code: &Code{
			Func: func(n string) (uint64, uint64, bool) {
				return fn, fn + uint64(len(code)), n == "kprobe_get_kallsym"
			},
			Refs: func(_ uint64, b []byte) ([]uint64, error) {
				var out []uint64
				for i := 0; i+8 <= len(b); i += 8 {
					out = append(out, binary.LittleEndian.Uint64(b[i:]))
				}
				return out, nil
			},
		}}
		return b, opt
	}
	b, opt := build(0)
	s, err := LoadKprobes(b.mem, b.symbols(), opt)
	require.NoError(t, err)
	assert.Empty(t, lines(t, s))
	require.Len(t, s.Heads(), 1)
	assert.Contains(t, s.Heads()[0].How, "one of 2 candidates")
	assert.Contains(t, s.Heads()[0].How, "each an empty list")

	b, opt = build(1)
	_, err = LoadKprobes(b.mem, b.symbols(), opt)
	require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	assert.Contains(t, err.Error(), "ambiguous")
}

func TestOptions(t *testing.T) {
	b := newKBuilder()
	b.head("bpf_kallsyms")
	_, err := LoadBPF(b.mem, b.symbols(), Options{Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 2, PageSize: 4096}, Layout: synthLayout})
	assert.True(t, errors.Is(err, errors.ErrUnsupported))
	_, err = LoadBPF(b.mem, b.symbols(), Options{Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 3000}, Layout: synthLayout})
	assert.True(t, errors.Is(err, errors.ErrUnsupported))
	// No target, or no page size: an error, not a guess.
	for _, tgt := range []memory.Target{{}, {ByteOrder: binary.LittleEndian, PtrSize: 8}} {
		_, err = LoadBPF(b.mem, b.symbols(), Options{Target: tgt, Layout: synthLayout})
		assert.ErrorIs(t, err, memory.ErrUnknownTarget)
	}
}

// TestBPFDroppedPage: one entry whose page the dump's filter dropped
// loses only itself: the walk goes on from the list head's other end, the
// rest are printed in list order, and the gap is reported once.
func TestBPFDroppedPage(t *testing.T) {
	b := newKBuilder()
	var ks []uint64
	for i := range 5 {
		b.alloc(4096) // each entry on a page of its own
		ks = append(ks, b.ksym(0x1000+uint64(i)*0x100, 0x1010+uint64(i)*0x100, []byte(fmt.Sprintf("prog%d", i))))
	}
	b.mem.Drop(ks[2], 72)
	s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
	require.NotNil(t, s)
	assert.Equal(t, []string{
		"1000 t prog0 [bpf] 16", "1100 t prog1 [bpf] 16", "1300 t prog3 [bpf] 16", "1400 t prog4 [bpf] 16",
	}, lines(t, s))
	var we *WalkError
	require.ErrorAs(t, err, &we)
	assert.Equal(t, ks[2]+48, we.Addr)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	n := 0
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		if errors.As(e, &we) {
			n++
		}
	}
	assert.Equal(t, 1, n, "the gap is reported once")

	// Two dropped pages: what lies between them is lost, both ends kept,
	// each break reported.
	b.mem.Drop(ks[3], 72)
	s, err = LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: synthLayout})
	require.NotNil(t, s)
	assert.Equal(t, []string{"1000 t prog0 [bpf] 16", "1100 t prog1 [bpf] 16", "1400 t prog4 [bpf] 16"}, lines(t, s))
	require.ErrorAs(t, err, &we)
}

// TestNoBPFJIT: a symbol table with data symbols but no bpf_kallsyms is a
// kernel built without CONFIG_BPF_JIT, whose BPF set is empty; without
// data symbols the list's absence says nothing, and is an error.
func TestNoBPFJIT(t *testing.T) {
	b := newKBuilder()
	withData := func(n string) (uint64, bool) { return synthBase, n == dataWitness }
	s, err := LoadBPF(b.mem, withData, Options{Target: le64, Layout: synthLayout})
	require.NoError(t, err)
	require.Equal(t, 0, s.Len())
	none := func(string) (uint64, bool) { return 0, false }
	_, err = LoadBPF(b.mem, none, Options{Target: le64, Layout: synthLayout})
	require.ErrorIs(t, err, ErrMissingInfo)
}
