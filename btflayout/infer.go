package btflayout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Layout inference: the offsets the module walk needs, read off the dump
// itself when it carries no BTF.
//
// struct module is __randomize_layout, but distribution kernels are built
// without CONFIG_RANDSTRUCT, and then its head is fixed since v2.6:
//
//	enum module_state state;        // offset 0
//	struct list_head list;          // offset = pointer size
//	char name[MODULE_NAME_LEN];     // 64 - pointer size bytes
//
// Everything else moves from build to build (config options add and remove
// members), so each offset is found by trying every candidate and keeping
// the one the data confirms, on every module used as evidence:
//
//   - the kallsyms pointer (v4.5+) points at the member right after it
//     (core_kallsyms, once init is done), a struct mod_kallsyms (symtab,
//     num_symtab, strtab, typetab since v5.2: the fixed order of
//     include/linux/module.h) whose symtab starts with the ELF null symbol,
//     whose names are NUL-terminated in its strtab, whose type letters
//     (typetab, st_size in v5.0–v5.1, st_info before) are letters, and whose
//     __this_module, where the symtab has it (CONFIG_KALLSYMS_ALL keeps
//     data symbols), is the struct's own address, which confirms the fixed
//     head above; before v4.5 symtab, num_symtab and strtab sit in struct
//     module and equal core_symtab, core_num_syms and core_strtab after
//     init;
//   - the memory regions: mem[MOD_MEM_NUM_TYPES] (v6.4+),
//     core_layout/init_layout (v4.5–v6.3) or module_core/core_size (before)
//     hold every named symbol of the module, the text region every text
//     symbol, the data region the struct itself, and with
//     CONFIG_MODULES_TREE_LOOKUP each region's mod_tree_node points back at
//     the struct (without __this_module, this is what confirms the head);
//   - syms/num_syms: the export table's entries are names in the module's
//     memory for values in it, and match its symtab where the symtab has
//     the symbol;
//   - source_list and refcnt (optional): each module_use names a module of
//     the list as source and this one as target, and refcnt covers them.
//
// taints is not inferred: nothing confirms it.
//
// A candidate that every module confirms and that is the only one is
// taken; none, or more than one, is an error.

// InferConfig says what Infer may rely on besides kernel memory.
type InferConfig struct {
	// Target is the kernel's machine: its ByteOrder and PtrSize are
	// required (see memory.Target).
	Target memory.Target
	// Release is the kernel release (VMCOREINFO's OSRELEASE): it picks the
	// generation of struct module's memory fields.
	Release string
	// Head is the address of the modules list head.
	Head uint64
}

// Inference bounds. Each is far beyond a real kernel; past one, the data is
// taken as corrupt.
const (
	// inferWindow is how much of each struct module is examined: sizeof is
	// 896–1280 bytes on Debian 5.10–6.12, larger with debug options.
	inferWindow = 4096
	// inferEvidence is how many modules each candidate must satisfy; the
	// walk then checks every module.
	inferEvidence = 16
	// inferMaxModules bounds the list walk (modsyms.MaxModules).
	inferMaxModules = 1 << 14
	// inferMaxSymbols bounds num_symtab (modsyms.MaxSymbols).
	inferMaxSymbols = 1 << 20
	// inferMaxExports bounds num_syms (modsyms.MaxExports).
	inferMaxExports = 1 << 18
	// inferMaxStrtab bounds the string table read (modsyms.MaxStrtab).
	inferMaxStrtab = 32 << 20
	// ksymNameLen is KSYM_NAME_LEN (512 since v6.1, 128 before): a symbol
	// name ends within it.
	ksymNameLen = 512
	// modMemTypes is MOD_MEM_NUM_TYPES since v6.4.
	modMemTypes = 7
)

// Inferred is a Source built by Infer. It is safe for concurrent use.
type Inferred struct {
	structs  map[string]*Struct
	evidence []string
	modules  int
}

// Describe implements Source.
func (in *Inferred) Describe() string { return "layouts inferred from the dump" }

// Struct implements Source.
func (in *Inferred) Struct(name string, need ...string) (*Struct, error) {
	if s := in.structs[name]; s != nil && s.Has(need...) {
		return s, nil
	}
	return nil, notFound(in, needDesc(name, need))
}

// Enum implements Source: inference finds no enum constants.
func (in *Inferred) Enum(name string) (map[string]int64, error) {
	return nil, notFound(in, "enum "+name)
}

// Evidence returns, one line per inferred offset, what confirmed it.
func (in *Inferred) Evidence() []string { return slices.Clone(in.evidence) }

// Want lists what Infer finds, for WriteTable.
func (in *Inferred) Want() Want {
	w := Want{Structs: map[string][]string{}}
	for n, s := range in.structs {
		for _, f := range s.fields {
			w.Structs[n] = append(w.Structs[n], f.Name)
		}
	}
	return w
}

// infer carries the state of one Infer.
type infer struct {
	kmem    memory.Reader
	t       memory.Target
	bo      binary.ByteOrder // t's
	p       uint64           // t's pointer size
	gen     memGen
	typetab bool
	// typeInSize: v5.0–v5.1 kept the type letter in st_size, not st_info.
	typeInSize bool
	bases      map[uint64]bool // every struct module on the list
	mods       []*evMod
}

type memGen uint8

const (
	genMem    memGen = iota // v6.4+
	genLayout               // v4.5–v6.3
	genFields               // before v4.5: module_core, core_size, ...; symtab in struct module
)

// evMod is one module used as evidence.
type evMod struct {
	base uint64
	raw  []byte // the start of its struct module, up to inferWindow bytes
	live bool
	this bool // its symtab has __this_module, at the struct
	// Filled in once the kallsyms pointer is known.
	syms    []esym
	byValue map[uint64][]int
	regions []region // once the memory fields are known
}

// esym is one symbol of a module's symtab.
type esym struct {
	name  string
	value uint64
	kind  byte // typetab letter, 0 without typetab
	shndx uint16
}

func inferErr(format string, a ...any) error {
	return &InferError{Msg: fmt.Sprintf(format, a...)}
}

// inferErrAt is inferErr for a problem of kind k found at addr.
func inferErrAt(k InferProblem, addr uint64, format string, a ...any) error {
	return &InferError{Problem: k, Addr: addr, Msg: fmt.Sprintf(format, a...)}
}

// parseRelease returns major and minor of a kernel release string.
func parseRelease(rel string) (int, int, bool) {
	maj, rest, ok := strings.Cut(rel, ".")
	if !ok {
		return 0, 0, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(rest[:i])
	return a, b, err1 == nil && err2 == nil
}

// Infer finds the offsets of struct module, struct list_head, struct
// mod_kallsyms and struct module_memory or module_layout by validating
// candidates against the modules on the list at cfg.Head (see the comment
// at the top of infer.go for the evidence each one needs).
//
// An empty list, a broken or looped list, a kernel before v2.6, a struct
// whose fixed head is not where it belongs
// (CONFIG_RANDSTRUCT), and an offset that no candidate or more than one
// candidate satisfies are errors wrapping ErrCorrupt or ErrNotFound
// (errors.ErrUnsupported for the generation); a broken list, a randomized
// struct and an ambiguous offset are an *InferError saying which. Memory
// faults wrap the reader's error; an incomplete cfg.Target is an error
// wrapping memory.ErrUnknownTarget.
func Infer(kmem memory.Reader, cfg InferConfig) (*Inferred, error) {
	if err := cfg.Target.Check(); err != nil {
		return nil, fmt.Errorf("btflayout: inferring layouts: %w", err)
	}
	maj, minor, ok := parseRelease(cfg.Release)
	if !ok {
		return nil, fmt.Errorf("btflayout: inferring layouts: kernel release %q unknown: %w", cfg.Release, ErrNotFound)
	}
	v := maj*1000 + minor
	x := newInfer(kmem, cfg.Target)
	x.typetab, x.typeInSize = v >= 5002, v >= 5000 && v < 5002
	switch {
	case v >= 6004:
		x.gen = genMem
	case v >= 4005:
		x.gen = genLayout
	case v >= 2006:
		x.gen = genFields
	default:
		return nil, fmt.Errorf("btflayout: inferring layouts: kernel %s: %w", cfg.Release, errors.ErrUnsupported)
	}
	nodes, err := x.walk(cfg.Head)
	if err != nil {
		return nil, err
	}
	x.bases = make(map[uint64]bool, len(nodes))
	for _, n := range nodes {
		x.bases[n-x.p] = true
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("btflayout: inferring layouts: the module list at %#x is empty: nothing to infer from: %w", cfg.Head, ErrNotFound)
	}
	p := x.p
	for _, n := range nodes[:min(len(nodes), inferEvidence)] {
		m, err := x.readModule(n - p)
		if err != nil {
			return nil, err
		}
		x.mods = append(x.mods, m)
	}
	in := &Inferred{structs: map[string]*Struct{}, modules: len(nodes)}
	ev := func(format string, a ...any) { in.evidence = append(in.evidence, fmt.Sprintf(format, a...)) }
	nameLen := 64 - p
	mod := []Field{
		{Name: "state", Offset: 0, Size: 4, Kind: KindEnum},
		{Name: "list", Offset: p, Size: 2 * p, Kind: KindStruct, TypeName: "list_head"},
		{Name: "name", Offset: 3 * p, Size: nameLen, Kind: KindArray, Count: nameLen, ElemSize: 1},
	}
	in.structs["list_head"] = NewStruct("list_head", 2*p,
		Field{Name: "next", Offset: 0, Size: p, Kind: KindPointer, TypeName: "list_head"},
		Field{Name: "prev", Offset: p, Size: p, Kind: KindPointer, TypeName: "list_head"})
	ev("list_head.next, .prev: %d modules linked both ways from the head at %#x", len(nodes), cfg.Head)

	this := 0
	if x.gen == genFields {
		off, err := x.findDirect()
		if err != nil {
			return nil, err
		}
		mod = append(mod,
			Field{Name: "symtab", Offset: off, Size: p, Kind: KindPointer},
			Field{Name: "num_symtab", Offset: off + 2*p, Size: 4, Kind: KindInt},
			Field{Name: "strtab", Offset: x.strtabOff(off), Size: p, Kind: KindPointer})
		for _, m := range x.mods {
			if m.this {
				this++
			}
		}
		ev("module.state, .list, .name, .symtab = %d, .num_symtab = %d, .strtab = %d: in %d modules, a valid name and state, symtab, num_symtab and strtab equal to core_symtab, core_num_syms and core_strtab after them, a symtab with the null symbol first, NUL-terminated names and type letters; __this_module at the struct itself in %d of them", off, off+2*p, x.strtabOff(off), len(x.mods), this)
	} else {
		k, err := x.findKallsyms()
		if err != nil {
			return nil, err
		}
		mod = append(mod, Field{Name: "kallsyms", Offset: k, Size: p, Kind: KindPointer, TypeName: "mod_kallsyms"})
		mk := []Field{
			{Name: "symtab", Offset: 0, Size: p, Kind: KindPointer},
			{Name: "num_symtab", Offset: p, Size: 4, Kind: KindInt},
			{Name: "strtab", Offset: 2 * p, Size: p, Kind: KindPointer},
		}
		mkSize := 3 * p
		if x.typetab {
			mk = append(mk, Field{Name: "typetab", Offset: 3 * p, Size: p, Kind: KindPointer})
			mkSize = 4 * p
		}
		in.structs["mod_kallsyms"] = NewStruct("mod_kallsyms", mkSize, mk...)
		for _, m := range x.mods {
			if m.this {
				this++
			}
		}
		ev("module.state, .list, .name, .kallsyms = %d: in %d modules, a valid name and state, and kallsyms points at the next member, a mod_kallsyms whose symtab has the null symbol first, NUL-terminated names and type letters; __this_module at the struct itself in %d of them", k, len(x.mods), this)

	}
	switch x.gen {
	case genMem:
		off, stride, sizeOff, tree, err := x.findMem()
		if err != nil {
			return nil, err
		}
		mod = append(mod, Field{Name: "mem", Offset: off, Size: modMemTypes * stride, Kind: KindArray, TypeName: "module_memory", Count: modMemTypes, ElemSize: stride})
		in.structs["module_memory"] = NewStruct("module_memory", stride,
			Field{Name: "base", Offset: 0, Size: p, Kind: KindPointer},
			Field{Name: "size", Offset: sizeOff, Size: 4, Kind: KindInt})
		how := "no mod_tree_node"
		if tree {
			how = "each region's mod_tree_node pointing back at the struct"
		} else if this == 0 {
			return nil, inferErr("no __this_module symbol and no mod_tree_node confirm where struct module starts")
		}
		ev("module.mem = %d (%d × %d bytes, size at %d): every named symbol in a region, text symbols in MOD_TEXT, the struct in MOD_DATA, %s", off, modMemTypes, stride, sizeOff, how)
	case genLayout:
		core, init, size, tree, err := x.findLayout()
		if err != nil {
			return nil, err
		}
		mod = append(mod,
			Field{Name: "core_layout", Offset: core, Size: size, Kind: KindStruct, TypeName: "module_layout"},
			Field{Name: "init_layout", Offset: init, Size: size, Kind: KindStruct, TypeName: "module_layout"})
		in.structs["module_layout"] = NewStruct("module_layout", size,
			Field{Name: "base", Offset: 0, Size: p, Kind: KindPointer},
			Field{Name: "size", Offset: p, Size: 4, Kind: KindInt},
			Field{Name: "text_size", Offset: p + 4, Size: 4, Kind: KindInt})
		how := "no mod_tree_node"
		if tree {
			how = "its mod_tree_node pointing back at the struct"
		} else if this == 0 {
			return nil, inferErr("no __this_module symbol and no mod_tree_node confirm where struct module starts")
		}
		ev("module.core_layout = %d, .init_layout = %d (%d bytes each): every named symbol in core, text symbols in its text, the struct in core, %s; init empty in every live module", core, init, size, how)
	}

	if x.gen == genFields {
		off, err := x.findFields()
		if err != nil {
			return nil, err
		}
		mod = append(mod,
			Field{Name: "module_init", Offset: off, Size: p, Kind: KindPointer},
			Field{Name: "module_core", Offset: off + p, Size: p, Kind: KindPointer},
			Field{Name: "init_size", Offset: off + 2*p, Size: 4, Kind: KindInt},
			Field{Name: "core_size", Offset: off + 2*p + 4, Size: 4, Kind: KindInt},
			Field{Name: "init_text_size", Offset: off + 2*p + 8, Size: 4, Kind: KindInt},
			Field{Name: "core_text_size", Offset: off + 2*p + 12, Size: 4, Kind: KindInt})
		ev("module.module_init = %d, .module_core = %d, sizes after them: every named symbol in core, text symbols in its text, the struct in core; init empty in every live module", off, off+p)
	}

	syms, numSyms, found, err := x.findSyms()
	if err != nil {
		return nil, err
	}
	if found {
		mod = append(mod,
			Field{Name: "syms", Offset: syms, Size: p, Kind: KindPointer, TypeName: "kernel_symbol"},
			Field{Name: "num_syms", Offset: numSyms, Size: 4, Kind: KindInt})
		ev("module.syms = %d, .num_syms = %d: export entries name symbols of the module's own symtab at their st_value", syms, numSyms)
	} else {
		ev("module.syms, .num_syms: not inferred (no module of the evidence exports a symbol, so no type letter depends on them)")
	}
	if src, ok, err := x.findSourceList(); err != nil {
		// Optional: an ambiguity leaves the columns unknown.
		ev("module.refcnt, .taints, .source_list: not inferred (%v)", err)
	} else if ok {
		mod = append(mod,
			Field{Name: "source_list", Offset: src, Size: 2 * p, Kind: KindStruct, TypeName: "list_head"},
			Field{Name: "refcnt", Offset: src + 5*p, Size: 4, Kind: KindStruct, TypeName: "atomic_t"})
		in.structs["module_use"] = NewStruct("module_use", 6*p,
			Field{Name: "source_list", Offset: 0, Size: 2 * p, Kind: KindStruct, TypeName: "list_head"},
			Field{Name: "target_list", Offset: 2 * p, Size: 2 * p, Kind: KindStruct, TypeName: "list_head"},
			Field{Name: "source", Offset: 4 * p, Size: p, Kind: KindPointer, TypeName: "module"},
			Field{Name: "target", Offset: 5 * p, Size: p, Kind: KindPointer, TypeName: "module"})
		ev("module.source_list = %d, .refcnt = %d: every user entry (module_use) names a module of the list as source and this one as target, the exit pointer between them is in the module's memory or NULL, and refcnt covers the users", src, src+5*p)
	} else {
		ev("module.refcnt, .taints, .source_list: not inferred (no module of the evidence has a user; /proc/modules' refcount, flags and users are not shown)")
	}
	// taints is not inferred: a word holding only module taint bits is
	// no evidence (on the corpus, such words other than taints exist in
	// most builds), so /proc/modules' flags are shown as unknown.
	ev("module.taints: not inferred (no independent evidence; /proc/modules' taint flags are shown as unknown)")
	in.structs["module"] = NewStruct("module", 0, mod...)
	return in, nil
}

// walk follows the list at head, checking that every link agrees both
// ways, and returns the nodes (addresses of module.list) in list order.
func (x *infer) walk(head uint64) ([]uint64, error) {
	var nodes []uint64
	seen := map[uint64]bool{head: true}
	prev := head
	node, err := x.ptr(head)
	if err != nil {
		return nil, fmt.Errorf("btflayout: inferring layouts: module list head at %#x: %w", head, err)
	}
	for node != head {
		if seen[node] {
			return nil, inferErr("the module list revisits %#x", node)
		}
		if len(nodes) >= inferMaxModules {
			return nil, inferErr("more than %d modules on the list at %#x", inferMaxModules, head)
		}
		seen[node] = true
		back, err := x.ptr(node + x.p)
		if err != nil {
			return nil, fmt.Errorf("btflayout: inferring layouts: module list node %#x: %w", node, err)
		}
		if back != prev {
			return nil, inferErrAt(ListBroken, node, "module list node %#x: prev is %#x, not %#x", node, back, prev)
		}
		nodes = append(nodes, node)
		prev = node
		if node, err = x.ptr(node); err != nil {
			return nil, fmt.Errorf("btflayout: inferring layouts: module list node %#x: %w", prev, err)
		}
	}
	if back, err := x.ptr(head + x.p); err != nil || back != prev {
		return nil, inferErrAt(ListBroken, head, "module list head %#x: prev is %#x, not the last node %#x", head, back, prev)
	}
	return nodes, nil
}

// newInfer starts an inference over kmem for t, which has passed Check.
func newInfer(kmem memory.Reader, t memory.Target) *infer {
	return &infer{kmem: kmem, t: t, bo: t.ByteOrder, p: uint64(t.PtrSize)}
}

func (x *infer) ptr(addr uint64) (uint64, error) {
	return x.t.ReadPointer(x.kmem, addr)
}

func (x *infer) word(b []byte, off uint64) uint64 {
	if off+x.p > uint64(len(b)) {
		return 0
	}
	return x.t.Pointer(b[off:])
}

func (x *infer) u32(b []byte, off uint64) uint64 {
	if off+4 > uint64(len(b)) {
		return 0
	}
	return uint64(x.bo.Uint32(b[off:]))
}

// readUpTo reads up to n bytes at addr, stopping at the first page that
// cannot be read; it returns what was read.
func readUpTo(kmem memory.Reader, addr, n uint64) []byte {
	const page = 4096
	buf := make([]byte, n)
	if memory.ReadFull(kmem, buf, addr) == nil {
		return buf
	}
	buf = buf[:0]
	for uint64(len(buf)) < n {
		at := addr + uint64(len(buf))
		k := min(n-uint64(len(buf)), page-at%page)
		chunk := buf[len(buf) : uint64(len(buf))+k]
		if memory.ReadFull(kmem, chunk, at) != nil {
			break
		}
		buf = buf[:uint64(len(buf))+k]
	}
	return buf
}

// validModuleName reports whether b is a NUL-terminated module name as
// the kernel's module loader accepts it in practice: letters, digits, '_'
// and '-' (KBUILD_MODNAME).
func validModuleName(b []byte) bool {
	i := bytes.IndexByte(b, 0)
	if i <= 0 {
		return false
	}
	for _, c := range b[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// readModule reads the head of the struct module at base and checks its
// fixed part.
func (x *infer) readModule(base uint64) (*evMod, error) {
	p := x.p
	raw := readUpTo(x.kmem, base, inferWindow)
	if uint64(len(raw)) < 3*p+(64-p) {
		return nil, fmt.Errorf("btflayout: inferring layouts: struct module at %#x: %w", base, memory.Fault(base+uint64(len(raw)), "", "read", memory.ErrNotSaved))
	}
	st := x.u32(raw, 0)
	if st > 3 {
		return nil, memory.WithRemedy(inferErrAt(Randomized, base, "struct module at %#x: state %d is no module_state (a randomized struct layout?)", base, st), memory.SupplyLayouts)
	}
	if !validModuleName(raw[3*p : 3*p+64-p]) {
		return nil, memory.WithRemedy(inferErrAt(Randomized, base, "struct module at %#x: no module name at offset %d (a randomized struct layout?)", base, 3*p), memory.SupplyLayouts)
	}
	return &evMod{base: base, raw: raw, live: st == 0}, nil
}

// esym returns the layout of Elf32_Sym or Elf64_Sym (the ELF ABI):
// entry size and the offsets of st_name, st_value and st_shndx.
func (x *infer) esym() (size, name, value, shndx uint64) {
	if x.p == 4 {
		return 16, 0, 4, 14
	}
	return 24, 0, 8, 6
}

// modKallsyms reads and checks the struct mod_kallsyms at kp for module m;
// it returns the module's named symbols.
func (x *infer) modKallsyms(m *evMod, kp uint64) ([]esym, error) {
	syms, this, err := x.modKallsymsThis(m, kp)
	if err == nil {
		m.this = this
	}
	return syms, err
}

// modKallsymsThis is modKallsyms, also saying whether the symtab has
// __this_module (kernels without CONFIG_KALLSYMS_ALL keep only text
// symbols of modules).
func (x *infer) modKallsymsThis(m *evMod, kp uint64) ([]esym, bool, error) {
	p := x.p
	mkLen := 3 * p
	if x.typetab {
		mkLen = 4 * p
	}
	mk := make([]byte, mkLen)
	if err := memory.ReadFull(x.kmem, mk, kp); err != nil {
		return nil, false, err
	}
	symtab, num, strtab := x.word(mk, 0), x.u32(mk, p), x.word(mk, 2*p)
	var typetab uint64
	if x.typetab {
		typetab = x.word(mk, 3*p)
	}
	return x.symtabOf(m, symtab, num, strtab, typetab)
}

// symtabOf reads and checks a module's symbol table (num Elf_Syms at
// symtab, names in strtab, type letters at typetab when the kernel has
// one); it returns the named symbols and whether __this_module is one.
func (x *infer) symtabOf(m *evMod, symtab, num, strtab, typetab uint64) ([]esym, bool, error) {
	if num == 0 || num > inferMaxSymbols || symtab == 0 || strtab == 0 || x.typetab && typetab == 0 {
		return nil, false, inferErr("symtab %#x, num_symtab %d, strtab %#x, typetab %#x", symtab, num, strtab, typetab)
	}
	es, nameOff, valueOff, shOff := x.esym()
	infoOff, sizeOff := uint64(4), uint64(16)
	if x.p == 4 {
		infoOff, sizeOff = 12, 8
	}
	// The null symbol first, and the last entry readable, before the
	// whole table is read: a wild pointer or a lying count costs little.
	var probe [24]byte
	if err := memory.ReadFull(x.kmem, probe[:es], symtab); err != nil {
		return nil, false, err
	}
	if !allZero(probe[:es]) {
		return nil, false, inferErr("symtab at %#x: entry 0 is not the null symbol", symtab)
	}
	if err := memory.ReadFull(x.kmem, probe[:1], symtab+num*es-1); err != nil {
		return nil, false, err
	}
	tab, err := readChunked(x.kmem, symtab, num*es)
	if err != nil {
		return nil, false, err
	}
	var types []byte
	if x.typetab {
		if types, err = readChunked(x.kmem, typetab, num); err != nil {
			return nil, false, err
		}
	}
	var maxName uint64
	for i := uint64(1); i < num; i++ {
		maxName = max(maxName, x.u32(tab, i*es+nameOff))
	}
	if maxName >= inferMaxStrtab {
		return nil, false, inferErr("symtab at %#x: st_name %d beyond the string table cap", symtab, maxName)
	}
	strs := readUpTo(x.kmem, strtab, maxName+ksymNameLen)
	if uint64(len(strs)) <= maxName || strs[0] != 0 {
		return nil, false, inferErr("strtab at %#x: unreadable or not starting with NUL", strtab)
	}
	out := make([]esym, 0, num)
	this := false
	for i := uint64(1); i < num; i++ {
		e := tab[i*es:]
		off := x.u32(e, nameOff)
		name, ok := cstrIn(strs[off:min(uint64(len(strs)), off+ksymNameLen)])
		if !ok {
			return nil, false, inferErr("strtab at %#x: name of symbol %d has no NUL", strtab, i)
		}
		s := esym{name: string(name), value: x.word(e, valueOff), shndx: x.bo.Uint16(e[shOff:])}
		switch {
		case types != nil:
			s.kind = types[i]
		case x.typeInSize:
			s.kind = byte(x.word(e, sizeOff))
		default:
			s.kind = e[infoOff] // the kernel put the letter there before v5.0
		}
		if !isTypeLetter(s.kind) {
			return nil, false, inferErr("symtab at %#x: symbol %d has type %#x", symtab, i, s.kind)
		}
		if s.name == "__this_module" {
			if s.value != m.base {
				return nil, false, inferErr("symtab at %#x: __this_module is %#x, not the struct at %#x", symtab, s.value, m.base)
			}
			this = true
		}
		if s.name != "" {
			out = append(out, s)
		}
	}
	return out, this, nil
}

func isTypeLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '?'
}

func cstrIn(b []byte) ([]byte, bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i], true
	}
	return nil, false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readChunked reads n bytes at addr; a large table is read in 4 MiB
// pieces so a lying count costs at most one piece beyond what exists.
func readChunked(kmem memory.Reader, addr, n uint64) ([]byte, error) {
	const chunk = 4 << 20
	if addr+n < addr {
		return nil, inferErr("table at %#x of %d bytes wraps the address space", addr, n)
	}
	var out []byte
	for off := uint64(0); off < n; off += chunk {
		k := min(n-off, chunk)
		out = slices.Grow(out, int(k))[:off+k]
		if err := memory.ReadFull(kmem, out[off:], addr+off); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// findKallsyms finds module.kallsyms: the one offset whose pointer leads,
// in every evidence module, to a valid struct mod_kallsyms listing the
// module itself as __this_module. After init it points at
// module.core_kallsyms, inside the struct: in a live module only pointers
// into its own struct are candidates.
func (x *infer) findKallsyms() (uint64, error) {
	var ref *evMod
	for _, m := range x.mods {
		if m.live {
			ref = m
			break
		}
	}
	if ref == nil {
		return 0, inferErr("no live module among the first %d", len(x.mods))
	}
	var found []uint64
	var syms [][]esym
	var firstErr error
	for off := 3*x.p + 64 - x.p; off+x.p <= uint64(len(ref.raw)); off += x.p {
		// After init, kallsyms points at core_kallsyms, the member right
		// after it.
		if x.word(ref.raw, off) != ref.base+off+x.p {
			continue
		}
		var got [][]esym
		ok := true
		for _, m := range x.mods {
			kp := x.word(m.raw, off)
			if off+x.p > uint64(len(m.raw)) || kp == 0 || m.live && kp != m.base+off+x.p {
				ok = false
				break
			}
			s, err := x.modKallsyms(m, kp)
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("offset %d of struct module at %#x: %w", off, m.base, err)
				}
				ok = false
				break
			}
			got = append(got, s)
		}
		if ok {
			found = append(found, off)
			syms = got
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("btflayout: inferring layouts: no offset of struct module leads to a mod_kallsyms in all of %d modules (first failure: %v): %w", len(x.mods), firstErr, ErrNotFound)
	case 1:
	default:
		return 0, inferErrAt(Ambiguous, 0, "module.kallsyms is ambiguous: offsets %v all fit", found)
	}
	for i, m := range x.mods {
		m.syms = syms[i]
		m.byValue = make(map[uint64][]int, len(m.syms))
		for j, s := range m.syms {
			m.byValue[s.value] = append(m.byValue[s.value], j)
		}
	}
	return found[0], nil
}

func isText(k byte) bool { return k == 't' || k == 'T' }

// region is one candidate memory block.
type region struct{ base, size uint64 }

func (r region) has(a uint64) bool { return r.size > 0 && a-r.base < r.size }

// symbolsFit checks a module's symbols against candidate regions: every
// named symbol in one of them, every text symbol in text. Two kinds say
// nothing about the regions: absolute symbols ('a', a value, not an
// address; per-CPU variables get it too) and weak objects ('v'), which
// include the per-CPU variables where the architecture makes them weak in
// modules (ARCH_NEEDS_WEAK_PER_CPU: s390x, alpha) and elf_type tests
// binding before section: their addresses are in the per-CPU area.
func symbolsFit(m *evMod, text []region, all []region) bool {
	for _, s := range m.syms {
		if s.kind == 'a' || s.kind == 'A' || s.kind == 'v' || s.kind == 'V' {
			continue
		}
		in := false
		for _, r := range all {
			if r.has(s.value) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
		if isText(s.kind) {
			in = false
			for _, r := range text {
				if r.has(s.value) {
					in = true
					break
				}
			}
			if !in {
				return false
			}
		}
	}
	return true
}

// findMem finds module.mem (v6.4+): offset and stride of struct
// module_memory and where its size is: { void *base; unsigned int size;
// [struct mod_tree_node mtn;] } up to 6.13, { void *base; bool is_rox;
// unsigned int size; [mtn] } since (Debian 7.0.4 to 7.3.4 headers): 2 or 3
// words, 9 or 10 with mtn, which follows size at a word boundary. With
// is_rox before size, its byte must be 0 or 1 and the padding after it 0.
func (x *infer) findMem() (off, stride, sizeOff uint64, tree bool, err error) {
	p := x.p
	type cand struct {
		off, stride, size uint64
		tree              bool
	}
	var found []cand
	for _, so := range []uint64{p, p + 4} {
		mtn := (so + 4 + p - 1) &^ (p - 1)
		for _, st := range []uint64{2 * p, 3 * p, 9 * p, 10 * p} {
			if st < so+4 {
				continue
			}
			for o := 3*p + 64 - p; o+modMemTypes*st <= inferWindow; o += p {
				ok, treeOK := true, st >= 9*p
				for _, m := range x.mods {
					if o+modMemTypes*st > uint64(len(m.raw)) {
						ok = false
						break
					}
					var rs [modMemTypes]region
					for i := range rs {
						e := o + uint64(i)*st
						rs[i] = region{x.word(m.raw, e), x.u32(m.raw, e+so)}
						if (rs[i].base == 0) != (rs[i].size == 0) {
							ok = false
						}
						if so > p && (m.raw[e+p] > 1 || m.raw[e+p+1]|m.raw[e+p+2]|m.raw[e+p+3] != 0) {
							ok = false // not a bool and its padding
						}
						if treeOK && rs[i].size > 0 && x.word(m.raw, e+mtn) != m.base {
							treeOK = false
						}
					}
					// MOD_TEXT holds code, MOD_DATA the struct itself.
					if !ok || rs[0].size == 0 || !rs[1].has(m.base) {
						ok = false
						break
					}
					text := []region{rs[0], rs[4]}
					if !symbolsFit(m, text, rs[:]) {
						ok = false
						break
					}
				}
				if ok && (st < 9*p || treeOK) {
					found = append(found, cand{o, st, so, treeOK})
				}
			}
		}
	}
	// A stride with the tree node that is confirmed by the back pointers
	// beats the same offset read with a shorter stride only if that one is
	// not confirmed too: both confirmed is an ambiguity.
	switch len(found) {
	case 0:
		return 0, 0, 0, false, fmt.Errorf("btflayout: inferring layouts: no offset and stride of module.mem fit all of %d modules: %w", len(x.mods), ErrNotFound)
	case 1:
		c := found[0]
		for _, m := range x.mods {
			for i := uint64(0); i < modMemTypes; i++ {
				e := c.off + i*c.stride
				m.regions = append(m.regions, region{x.word(m.raw, e), x.u32(m.raw, e+c.size)})
			}
		}
		return c.off, c.stride, c.size, c.tree, nil
	}
	return 0, 0, 0, false, inferErrAt(Ambiguous, 0, "module.mem is ambiguous: %d candidates (first %+v, %+v)", len(found), found[0], found[1])
}

// findLayout finds module.core_layout and init_layout (v4.5–v6.3):
// struct module_layout { void *base; unsigned int size, text_size,
// ro_size[, ro_after_init_size (v4.10+)]; [struct mod_tree_node mtn;] }.
func (x *infer) findLayout() (core, init, size uint64, tree bool, err error) {
	p := x.p
	mtnOff := (p + 16 + p - 1) &^ (p - 1)
	type cand struct {
		off  uint64
		tree bool
	}
	var found []cand
	for o := 3*p + 64 - p; o+mtnOff+p <= inferWindow; o += p {
		ok, treeOK := true, true
		for _, m := range x.mods {
			if o+mtnOff+p > uint64(len(m.raw)) {
				ok = false
				break
			}
			r := region{x.word(m.raw, o), x.u32(m.raw, o+p)}
			text, ro := x.u32(m.raw, o+p+4), x.u32(m.raw, o+p+8)
			if r.base == 0 || text == 0 || text > ro || ro > r.size || !r.has(m.base) {
				ok = false
				break
			}
			if x.word(m.raw, o+mtnOff) != m.base {
				treeOK = false
			}
			if !symbolsFit(m, []region{{r.base, text}}, []region{r}) {
				ok = false
				break
			}
		}
		if ok {
			found = append(found, cand{o, treeOK})
		}
	}
	switch len(found) {
	case 0:
		return 0, 0, 0, false, fmt.Errorf("btflayout: inferring layouts: no offset of module.core_layout fits all of %d modules: %w", len(x.mods), ErrNotFound)
	case 1:
	default:
		return 0, 0, 0, false, inferErrAt(Ambiguous, 0, "module.core_layout is ambiguous: offsets %+v all fit", found)
	}
	c := found[0]
	for _, m := range x.mods {
		m.regions = []region{{x.word(m.raw, c.off), x.u32(m.raw, c.off+p)}}
	}
	// sizeof(struct module_layout): the tree node is a struct module
	// pointer and a latch_tree_node (two rb_nodes of three words).
	size = mtnOff
	if c.tree {
		size = mtnOff + 7*p
	}
	init = c.off + size
	for _, m := range x.mods {
		if !m.live {
			continue
		}
		if init+2*p > uint64(len(m.raw)) || x.word(m.raw, init) != 0 || x.u32(m.raw, init+p) != 0 {
			return 0, 0, 0, false, inferErr("struct module at %#x: init_layout at %d is not empty in a live module", m.base, init)
		}
	}
	return c.off, init, size, c.tree, nil
}

// findSyms finds module.syms and num_syms (const struct kernel_symbol
// *syms; const s32 *crcs; [const u8 *flagstab (7.1+);] unsigned int
// num_syms;) from the modules that export something: off and numOff are
// their offsets. found is false when none of the evidence does. With
// flagstab, an exporting module's must point into its memory.
func (x *infer) findSyms() (off, numOff uint64, found bool, err error) {
	p := x.p
	type cand struct{ off, num uint64 }
	var offs []cand
	for _, nf := range []uint64{2 * p, 3 * p} {
		for o := 3*p + 64 - p; o+nf+p <= inferWindow; o += p {
			confirmed, matched, ok := 0, 0, true
			for _, m := range x.mods {
				if o+nf+p > uint64(len(m.raw)) {
					ok = false
					break
				}
				syms, num := x.word(m.raw, o), x.u32(m.raw, o+nf)
				if num == 0 {
					continue
				}
				if nf == 3*p && !inAny(m.regions, x.word(m.raw, o+2*p)) {
					ok = false // no flagstab in the module
					break
				}
				if num > inferMaxExports || syms == 0 || !x.exportsFit(m, syms, num, &matched) {
					ok = false
					break
				}
				confirmed++
			}
			if ok && confirmed > 0 && matched > 0 {
				offs = append(offs, cand{o, o + nf})
			}
		}
	}
	switch len(offs) {
	case 0:
		for _, m := range x.mods {
			// A module exports if its symtab has a __ksymtab_ entry; then
			// the table must have been found.
			for _, s := range m.syms {
				if strings.HasPrefix(s.name, "__ksymtab_") {
					return 0, 0, false, fmt.Errorf("btflayout: inferring layouts: module at %#x exports %s, but no offset of module.syms fits: %w", m.base, s.name[len("__ksymtab_"):], ErrNotFound)
				}
			}
		}
		return 0, 0, false, nil
	case 1:
		return offs[0].off, offs[0].num, true, nil
	}
	return 0, 0, false, inferErrAt(Ambiguous, 0, "module.syms is ambiguous: (offset, num_syms) %v all fit", offs)
}

// exportsFit reports whether the first entries of the table at syms are
// struct kernel_symbols (place-relative or absolute, with or without a
// namespace) naming symbols of m at their own value.
func (x *infer) exportsFit(m *evMod, syms, num uint64, matched *int) bool {
	p := x.p
	n := min(num, 8)
	type kl struct {
		prel   bool
		stride uint64
	}
	for _, c := range []kl{{true, 12}, {true, 8}, {false, 3 * p}, {false, 2 * p}} {
		raw := make([]byte, n*c.stride)
		if memory.ReadFull(x.kmem, raw, syms) != nil {
			return false
		}
		ok, hits := true, 0
		for i := uint64(0); i < n && ok; i++ {
			e := i * c.stride
			var value, name uint64
			if c.prel {
				at := syms + e
				value = at + uint64(int64(int32(x.bo.Uint32(raw[e:]))))
				name = at + 4 + uint64(int64(int32(x.bo.Uint32(raw[e+4:]))))
			} else {
				value, name = x.word(raw, e), x.word(raw, e+p)
			}
			s, err := memory.CString(x.kmem, name, ksymNameLen)
			if err != nil || !isIdent(s) || !inAny(m.regions, value) || !inAny(m.regions, name) {
				ok = false
				break
			}
			// Where the symtab has the symbol (always with
			// CONFIG_KALLSYMS_ALL; text only without), it is the same.
			if idx := m.byValue[value]; len(idx) > 0 {
				for _, j := range idx {
					if m.syms[j].name == s {
						hits++
					}
				}
			}
		}
		if ok {
			*matched += hits
			return true
		}
	}
	return false
}

func inAny(rs []region, a uint64) bool {
	for _, r := range rs {
		if r.has(a) {
			return true
		}
	}
	return false
}

// strtabOff is the offset of module.strtab for symtab at off (before
// v4.5): Elf_Sym *symtab, *core_symtab; unsigned int num_symtab,
// core_num_syms; char *strtab, *core_strtab.
func (x *infer) strtabOff(off uint64) uint64 {
	return (off + 2*x.p + 8 + x.p - 1) &^ (x.p - 1)
}

// findDirect finds module.symtab (before v4.5): after init, symtab,
// num_symtab and strtab equal core_symtab, core_num_syms and core_strtab,
// which follow each of them, and lead to a valid symbol table.
func (x *infer) findDirect() (uint64, error) {
	p := x.p
	var found []uint64
	var syms [][]esym
	var firstErr error
	for off := 3*p + 64 - p; x.strtabOff(off)+2*p <= inferWindow; off += p {
		ok := false
		var got [][]esym
		for _, m := range x.mods {
			so := x.strtabOff(off)
			if so+2*p > uint64(len(m.raw)) {
				ok = false
				break
			}
			symtab, num, strtab := x.word(m.raw, off), x.u32(m.raw, off+2*p), x.word(m.raw, so)
			if m.live && (symtab != x.word(m.raw, off+p) || num != x.u32(m.raw, off+2*p+4) || strtab != x.word(m.raw, so+p)) || symtab == 0 {
				ok = false
				break
			}
			s, this, err := x.symtabOf(m, symtab, num, strtab, 0)
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("offset %d of struct module at %#x: %w", off, m.base, err)
				}
				ok = false
				break
			}
			m.this = this
			got = append(got, s)
			ok = true
		}
		if ok {
			found = append(found, off)
			syms = got
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("btflayout: inferring layouts: no offset of struct module holds a symbol table in all of %d modules (first failure: %v): %w", len(x.mods), firstErr, ErrNotFound)
	case 1:
	default:
		return 0, inferErrAt(Ambiguous, 0, "module.symtab is ambiguous: offsets %v all fit", found)
	}
	x.setSyms(syms)
	return found[0], nil
}

func (x *infer) setSyms(syms [][]esym) {
	for i, m := range x.mods {
		m.syms = syms[i]
		m.byValue = make(map[uint64][]int, len(m.syms))
		for j, s := range m.syms {
			m.byValue[s.value] = append(m.byValue[s.value], j)
		}
	}
}

// findFields finds module.module_init (before v4.5): void *module_init,
// *module_core; unsigned int init_size, core_size, init_text_size,
// core_text_size. The core holds every named symbol and the struct itself,
// its text every text symbol; a live module's init is gone.
func (x *infer) findFields() (uint64, error) {
	p := x.p
	var found []uint64
	for o := 3*p + 64 - p; o+2*p+16 <= inferWindow; o += p {
		ok := true
		for _, m := range x.mods {
			if o+2*p+16 > uint64(len(m.raw)) {
				ok = false
				break
			}
			core := region{x.word(m.raw, o+p), x.u32(m.raw, o+2*p+4)}
			text := x.u32(m.raw, o+2*p+12)
			if core.base == 0 || text == 0 || text > core.size || !core.has(m.base) {
				ok = false
				break
			}
			if m.live && (x.word(m.raw, o) != 0 || x.u32(m.raw, o+2*p) != 0) {
				ok = false
				break
			}
			if !symbolsFit(m, []region{{core.base, text}}, []region{core}) {
				ok = false
				break
			}
		}
		if ok {
			found = append(found, o)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("btflayout: inferring layouts: no offset of module.module_core fits all of %d modules: %w", len(x.mods), ErrNotFound)
	case 1:
	default:
		return 0, inferErrAt(Ambiguous, 0, "module.module_core is ambiguous: offsets %v all fit", found)
	}
	for _, m := range x.mods {
		m.regions = []region{{x.word(m.raw, found[0]+p), x.u32(m.raw, found[0]+2*p+4)}}
	}
	return found[0], nil
}

// maxUsers bounds the entries of one module's source_list read.
const maxUsers = 1 << 10

// findSourceList finds module.source_list (CONFIG_MODULE_UNLOAD):
// struct list_head source_list, target_list; void (*exit)(void); atomic_t
// refcnt. Its entries are struct module_use { list_head source_list,
// target_list; struct module *source, *target; }: each names a module of
// the list as source and this module as target. An empty list points at
// itself. ok is false when no evidence module has a user.
func (x *infer) findSourceList() (off uint64, ok bool, err error) {
	p := x.p
	var offs []uint64
	for o := 3*p + 64 - p; o+5*p+4 <= inferWindow; o += p {
		confirmed, good := 0, true
		for _, m := range x.mods {
			if o+5*p+4 > uint64(len(m.raw)) {
				good = false
				break
			}
			head := m.base + o
			next, prev := x.word(m.raw, o), x.word(m.raw, o+p)
			users := 0
			if next == head || prev == head {
				if next != prev {
					good = false
					break
				}
			} else {
				last := head
				for node := next; node != head; users++ {
					if users >= maxUsers {
						good = false
						break
					}
					var use [48]byte
					if memory.ReadFull(x.kmem, use[:6*p], node) != nil ||
						x.word(use[:], p) != last || !x.bases[x.word(use[:], 4*p)] || x.word(use[:], 5*p) != m.base {
						good = false
						break
					}
					last, node = node, x.word(use[:], 0)
				}
				if !good || x.word(m.raw, o+p) != last {
					good = false
					break
				}
				confirmed++
			}
			exit := x.word(m.raw, o+4*p)
			ref := x.u32(m.raw, o+5*p)
			if exit != 0 && !inAny(m.regions, exit) || ref == 0 || ref > 1<<24 || uint64(ref-1) < uint64(users) {
				good = false
				break
			}
		}
		if good && confirmed > 0 {
			offs = append(offs, o)
		}
	}
	switch len(offs) {
	case 0:
		return 0, false, nil
	case 1:
		return offs[0], true, nil
	}
	return 0, false, inferErrAt(Ambiguous, 0, "module.source_list is ambiguous: offsets %v all fit", offs)
}
