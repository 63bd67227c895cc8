package modsyms

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// fakeMem is sparse synthetic kernel memory.
type fakeMem = testutil.SparseMemory

func newFakeMem() *fakeMem { return testutil.NewSparseMemory() }

var le = binary.LittleEndian

// kbuilder lays out a synthetic kernel's module list using a layout table.
type kbuilder struct {
	t    testing.TB
	mem  *fakeMem
	lay  *btflayout.Table
	next uint64 // bump allocator
	// gran is the allocation granule: 0 for pages, as module memory is;
	// FuzzWalk packs its seed with a small one.
	gran uint64
	head uint64
	mods []uint64 // struct module addresses in list order
}

type ksym struct {
	name        string
	value, size uint64
	typ         byte // typetab letter (or st_info without typetab)
	export      bool
}

type kmod struct {
	name     string
	state    uint32
	syms     []ksym
	refcnt   uint32
	textSize uint64
	// textBase, if not 0, is where the text region says it lies (its
	// bytes are not in memory; nothing reads them).
	textBase uint64
}

func newKBuilder(t testing.TB, table string) *kbuilder {
	lay, err := btflayout.ParseTable(strings.NewReader(table), "test")
	require.NoError(t, err)
	b := &kbuilder{t: t, mem: newFakeMem(), lay: lay, next: 0xffffffffc0000000}
	b.head = 0xffffffff82000000
	b.mem.Write(b.head, u64s(b.head, b.head))
	return b
}

func u64s(v ...uint64) []byte {
	out := make([]byte, 8*len(v))
	for i, x := range v {
		le.PutUint64(out[8*i:], x)
	}
	return out
}

func (b *kbuilder) alloc(n uint64) uint64 {
	g := b.gran
	if g == 0 {
		g = 4096
	}
	a := b.next
	b.next += (n + g - 1) &^ (g - 1)
	if n == 0 {
		b.next += g
	}
	return a
}

func (b *kbuilder) off(s, f string) btflayout.Field {
	st, err := b.lay.Struct(s, f)
	require.NoError(b.t, err)
	fl, _ := st.Field(f)
	return fl
}

func (b *kbuilder) has(s, f string) bool {
	_, err := b.lay.Struct(s, f)
	return err == nil
}

func (b *kbuilder) put(base uint64, s, f string, v uint64) {
	fl := b.off(s, f)
	buf := make([]byte, 8)
	le.PutUint64(buf, v)
	size := fl.Size
	if size == 0 {
		size = 8
	}
	b.mem.Write(base+fl.Offset, buf[:size])
}

// add appends a module at the tail of the list (the kernel adds at the
// head; tests think in list order).
func (b *kbuilder) add(m kmod) uint64 {
	modSt, _ := b.lay.Struct("module")
	mod := b.alloc(modSt.Size)
	b.mem.Write(mod, make([]byte, modSt.Size))
	b.put(mod, "module", "state", uint64(m.state))
	b.mem.Write(mod+b.off("module", "name").Offset, append([]byte(m.name), 0))
	if b.has("module", "refcnt") {
		b.put(mod, "module", "refcnt", uint64(m.refcnt))
	}

	// Text, then symbol tables in data.
	text := b.alloc(max(m.textSize, 1))
	if m.textBase != 0 {
		text = m.textBase
	}
	// symtab + strtab + typetab.
	n := uint64(len(m.syms) + 1)
	symtab := b.alloc(24 * n)
	strs := []byte{0}
	tab := make([]byte, 24*n)
	types := []byte{'?'}
	for i, s := range m.syms {
		e := tab[24*(i+1):]
		le.PutUint32(e[0:], uint32(len(strs)))
		if s.name == "" {
			le.PutUint32(e[0:], 0)
		} else {
			strs = append(append(strs, s.name...), 0)
		}
		e[4] = s.typ
		le.PutUint64(e[8:], s.value)
		le.PutUint64(e[16:], s.size)
		types = append(types, s.typ)
	}
	b.mem.Write(symtab, tab)
	strtab := b.alloc(uint64(len(strs)))
	b.mem.Write(strtab, strs)
	typetab := b.alloc(n)
	b.mem.Write(typetab, types)
	dataSize := uint64(4096 * 3)
	mk := b.alloc(32)
	if b.has("module", "kallsyms") {
		b.put(mod, "module", "kallsyms", mk)
		b.put(mk, "mod_kallsyms", "symtab", symtab)
		b.put(mk, "mod_kallsyms", "num_symtab", n)
		b.put(mk, "mod_kallsyms", "strtab", strtab)
		if b.has("mod_kallsyms", "typetab") {
			b.put(mk, "mod_kallsyms", "typetab", typetab)
		}
	}

	// Exports: PREL32 kernel_symbol {value_offset, name_offset, ns_offset},
	// sorted by name, names in a strings block.
	var ex []ksym
	for _, s := range m.syms {
		if s.export {
			ex = append(ex, s)
		}
	}
	sort.Slice(ex, func(i, j int) bool { return ex[i].name < ex[j].name })
	if len(ex) > 0 {
		ksyms := b.alloc(uint64(12 * len(ex)))
		nameBytes := 0
		for _, s := range ex {
			nameBytes += len(s.name) + 1
		}
		kstr := b.alloc(uint64(nameBytes))
		var sb []byte
		kt := make([]byte, 12*len(ex))
		for i, s := range ex {
			at := ksyms + uint64(12*i)
			le.PutUint32(kt[12*i:], uint32(int32(int64(s.value-at))))
			le.PutUint32(kt[12*i+4:], uint32(int32(int64(kstr+uint64(len(sb))-(at+4)))))
			sb = append(append(sb, s.name...), 0)
		}
		b.mem.Write(ksyms, kt)
		b.mem.Write(kstr, sb)
		b.put(mod, "module", "syms", ksyms)
		b.put(mod, "module", "num_syms", uint64(len(ex)))
		// The export tables live in the module too.
		dataSize = kstr + 4096 - symtab
	} else {
		dataSize = mk + 4096 - symtab
	}

	switch {
	case b.has("module", "mem"):
		mem := b.off("module", "mem")
		stride := mem.ElemSize
		ms, _ := b.lay.Struct("module_memory")
		bo, so := b.off("module_memory", "base"), b.off("module_memory", "size")
		_ = ms
		b.mem.Write(mod+mem.Offset+0*stride+bo.Offset, u64s(text))
		b.put(mod+mem.Offset+0*stride, "module_memory", "size", m.textSize)
		b.mem.Write(mod+mem.Offset+1*stride+bo.Offset, u64s(symtab))
		b.put(mod+mem.Offset+1*stride, "module_memory", "size", dataSize)
		_ = so
	case b.has("module", "core_layout"):
		cl := b.off("module", "core_layout").Offset
		b.put(mod+cl, "module_layout", "base", text)
		b.put(mod+cl, "module_layout", "size", symtab+dataSize-text)
		b.put(mod+cl, "module_layout", "text_size", m.textSize)
	}

	// Link at the tail.
	lo := b.off("module", "list").Offset
	node := mod + lo
	prevNode, _ := memory.Uint64(b.mem, le, b.head+8)
	b.mem.Write(node, u64s(b.head, prevNode))
	b.mem.Write(prevNode, u64s(node))
	b.mem.Write(b.head+8, u64s(node))
	b.mods = append(b.mods, mod)
	return mod
}

func (b *kbuilder) syms() Symbols {
	return func(name string) (uint64, bool) {
		if name == "modules" {
			return b.head, true
		}
		return 0, false
	}
}

// kallsymsLines renders the module part of /proc/kallsyms.
func kallsymsLines(t testing.TB, f symfinder.Finder) ([]string, error) {
	var out []string
	err := f.Find(symfinder.Query{Kind: symfinder.All}, func(s symfinder.Symbol) bool {
		out = append(out, fmt.Sprintf("%016x %c %s\t[%s]", s.Addr, s.Kind, s.Name, s.Module))
		return true
	})
	return out, err
}

// Layout of a v6.4+ kernel (made-up offsets: never the real ones, so that
// nothing passes by accident).
const layout64 = `
sizeof(module) = 512
module.state = 0:4
module.list = 8:16
module.name = 24:56
module.syms = 96:8
module.num_syms = 104:4
module.refcnt = 108:4
module.mem = 128:112:7
module.kallsyms = 256:8
module.core_kallsyms = 264:32
sizeof(module_memory) = 16
module_memory.base = 0:8
module_memory.size = 12:4
sizeof(mod_kallsyms) = 32
mod_kallsyms.symtab = 0:8
mod_kallsyms.num_symtab = 8:4
mod_kallsyms.strtab = 16:8
mod_kallsyms.typetab = 24:8
enum(mod_mem_type).MOD_TEXT = 0
enum(mod_mem_type).MOD_DATA = 1
`

// Layout of a v5.2–v6.3 kernel without typetab (as before v5.2, where the
// letter is in st_info): core_layout/init_layout.
const layoutCore = `
sizeof(module) = 400
module.list = 0:16
module.state = 16:4
module.name = 40:56
module.core_layout = 120:40
module.init_layout = 160:40
module.kallsyms = 208:8
module.syms = 216:8
module.num_syms = 224:4
sizeof(module_layout) = 40
module_layout.base = 0:8
module_layout.size = 8:4
module_layout.text_size = 12:4
sizeof(mod_kallsyms) = 24
mod_kallsyms.symtab = 0:8
mod_kallsyms.num_symtab = 8:4
mod_kallsyms.strtab = 16:8
`
