package export

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"

	"github.com/cilium/ebpf/btf"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// ISFFormat is the version of the volatility3 symbol table format WriteISF
// writes: volatility3's schema-6.2.0.json, the version dwarf2json 0.9
// writes and volatility3 2.x reads with anonymous members flattened into
// their parent.
const ISFFormat = "6.2.0"

// ISF is what WriteISF needs of a kernel.
type ISF struct {
	// Producer and Version name the writer in the metadata. Version must be
	// MAJOR.MINOR.PATCH (the schema's pattern); ISFVersion makes one.
	Producer, Version string
	// Spec is the kernel's BTF: every struct, union, enum, typedef and
	// base type of the file comes from it.
	Spec *btf.Spec
	// Target is the kernel's machine: its ByteOrder and PtrSize are
	// required (see memory.Target).
	Target memory.Target
	// CharSigned says whether plain char is signed (x86 before 6.2: BTF
	// does not record it).
	CharSigned bool
	// KASLROffset is subtracted from every symbol address but the
	// absolute ones (kallsyms letter a or A), giving link-time addresses.
	KASLROffset uint64
	// Banner is linux_banner's bytes in the dump, its terminating NUL
	// included; volatility3 finds the kernel by scanning memory for it. Nil
	// when unknown: the file then has no identifier.
	Banner []byte
	// Symbols are the vmlinux symbols at their runtime addresses, in
	// kallsyms order.
	Symbols []symfinder.Symbol
}

// ISFStats counts what WriteISF wrote.
type ISFStats struct {
	BaseTypes, UserTypes, Enums, Symbols int
	// TypedSymbols is how many symbols have a type.
	TypedSymbols int
	// Duplicates counts struct, union or enum names defined more than once
	// in the BTF: one definition is written per name (see WriteISF).
	Duplicates int
}

var versionRE = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)`)

// ISFVersion turns a Go module version ("v1.2.3", "v0.0.0-2026...",
// "(devel)") into the MAJOR.MINOR.PATCH the ISF schema wants: the numeric
// prefix, else 0.0.0.
func ISFVersion(v string) string {
	if m := versionRE.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return "0.0.0"
}

// isfSymbolType is the C type of a kernel variable volatility3 reads by
// symbol: a base (struct NAME, union NAME, a typedef or base type name as
// the BTF spells it), ptr levels of pointer to it, and an array of count
// elements when array is set (count 0: an extern declaration of unknown
// size, as the kernel's headers declare it).
type isfSymbolType struct {
	base  string
	ptr   int
	array bool
	count int
}

// isfSymbolTypes are the variables volatility3's Linux support reads by
// symbol with a type (object_from_symbol), or should find typed (BTF has
// no types of global variables): its automagic (init_task, init_files,
// the page table roots, linux_banner), its plugins (lsmod: modules;
// pslist: init_task; kmsg: prb, log_buf...; sockstat and netfilter:
// net_namespace_list; ebpf: prog_idr; check_idt: idt_table; ...) and
// framework/symbols/linux (_text, _etext, vmemmap_base, mem_map,
// cap_last_cap). The types are the kernel's declarations; one whose base
// type the BTF lacks is left off.
var isfSymbolTypes = map[string]isfSymbolType{
	"init_task":                {base: "struct task_struct"},
	"init_files":               {base: "struct files_struct"},
	"init_fs":                  {base: "struct fs_struct"},
	"init_mm":                  {base: "struct mm_struct"},
	"init_pid_ns":              {base: "struct pid_namespace"},
	"init_uts_ns":              {base: "struct uts_namespace"},
	"init_net":                 {base: "struct net"},
	"modules":                  {base: "struct list_head"},
	"mod_tree":                 {base: "struct mod_tree_root"},
	"module_kset":              {base: "struct kset", ptr: 1},
	"net_namespace_list":       {base: "struct list_head"},
	"tty_drivers":              {base: "struct list_head"},
	"prog_idr":                 {base: "struct idr"},
	"prb":                      {base: "struct printk_ringbuffer", ptr: 1},
	"log_buf":                  {base: "char", ptr: 1},
	"log_buf_len":              {base: "u32"},
	"log_first_idx":            {base: "u32"},
	"log_next_idx":             {base: "u32"},
	"cap_last_cap":             {base: "int"},
	"jiffies":                  {base: "long unsigned int"},
	"jiffies_64":               {base: "u64"},
	"vmemmap_base":             {base: "long unsigned int"},
	"page_offset_base":         {base: "long unsigned int"},
	"vmalloc_base":             {base: "long unsigned int"},
	"mem_map":                  {base: "struct page", ptr: 1},
	"keyboard_notifier_list":   {base: "struct atomic_notifier_head"},
	"socket_file_ops":          {base: "struct file_operations"},
	"sockfs_dentry_operations": {base: "struct dentry_operations"},
	"iomem_resource":           {base: "struct resource"},
	"idt_table":                {base: "gate_desc", array: true, count: 256}, // IDT_ENTRIES
	"init_top_pgt":             {base: "pgd_t", array: true},
	"init_level4_pgt":          {base: "pgd_t", array: true},
	"swapper_pg_dir":           {base: "pgd_t", array: true},
	// asm-generic/sections.h: extern char _text[], ...
	"_text": {base: "char", array: true}, "_stext": {base: "char", array: true},
	"_etext": {base: "char", array: true}, "_sdata": {base: "char", array: true},
	"_edata": {base: "char", array: true}, "__bss_start": {base: "char", array: true},
	"__bss_stop": {base: "char", array: true}, "_end": {base: "char", array: true},
	"_sinittext": {base: "char", array: true}, "_einittext": {base: "char", array: true},
	"__init_begin": {base: "char", array: true}, "__init_end": {base: "char", array: true},
	"__start_rodata": {base: "char", array: true}, "__end_rodata": {base: "char", array: true},
}

// ErrNoBTF means WriteISF was given no BTF (ISF.Spec is nil): the types
// of an ISF file come from the kernel's BTF.
var ErrNoBTF = errors.New("no BTF")

// maxTypeDepth bounds the nesting of one type descriptor (pointers,
// arrays, typedefs, qualifiers). The kernel's deepest is a handful; a BTF
// that goes deeper is cut there, with void.
const maxTypeDepth = 64

// isf holds what WriteISF found in the BTF.
type isf struct {
	in        *ISF
	names     map[btf.Type]string     // struct, union, enum → its key
	tdNames   map[*btf.Typedef]string // typedef of an anonymous struct or union → its key
	users     map[string]btf.Type     // user_types key → *btf.Struct or *btf.Union
	enums     map[string]*btf.Enum    // enums key → enum
	bases     map[string]isfBase      // base_types
	typedefs  map[string]*btf.Typedef // typedef name → first typedef of the name
	percpu    map[string]btf.Type     // per-CPU variable → its type (BTF's .data..percpu)
	dupPercpu map[string]bool         // per-CPU variable names seen twice
	refs      map[btf.Type]int        // how often a composite is referred to
	baseNames []string                // base_types keys, sorted
	dups      int
}

type isfBase struct {
	size   uint32
	signed bool
	kind   string
}

// WriteISF writes a volatility3 symbol table (ISF JSON, format ISFFormat)
// of the kernel to w: base_types from the BTF's integer and float types
// plus "void" and "pointer"; user_types, every struct and union of the BTF
// with its size and fields; enums; and symbols, every vmlinux symbol at its
// link-time address, with the types volatility3 reads by symbol
// (isfSymbolTypes, and the per-CPU variables BTF types) and linux_banner's
// bytes as constant_data, which is how volatility3 matches the file to a
// memory image.
//
// Types are named as dwarf2json names them: a typedef is replaced by what
// it names, except that a typedef of an anonymous struct or union is a
// user type of the typedef's name; qualifiers are dropped; an anonymous
// struct, union or enum is "unnamed_btf_ID" (its BTF type ID); an
// anonymous member is "unnamed_field_N" with "anonymous": true; a bitfield
// is {"kind": "bitfield", "bit_position", "bit_length", "type"} at the
// offset of its storage unit (the aligned unit of its type's size holding
// it, or its first byte when it straddles one), bit_position counted from
// the unit's least significant bit. When the BTF defines a name more than
// once (different structs of one name in different files), the definition
// the other types refer to most is written. Symbols of one name are
// written once: the first global one, else the first.
//
// An ISF without BTF is an error wrapping ErrNoBTF; a Target without its
// byte order or pointer size one wrapping memory.ErrUnknownTarget, one
// with a pointer size no kernel has errors.ErrUnsupported.
func WriteISF(w io.Writer, in *ISF) (ISFStats, error) {
	if in.Spec == nil {
		return ISFStats{}, fmt.Errorf("export: ISF: %w", ErrNoBTF)
	}
	if err := in.Target.Check(); err != nil {
		return ISFStats{}, fmt.Errorf("export: ISF: %w", err)
	}
	x := &isf{
		in: in, names: map[btf.Type]string{}, tdNames: map[*btf.Typedef]string{},
		users: map[string]btf.Type{}, enums: map[string]*btf.Enum{}, bases: map[string]isfBase{},
		typedefs: map[string]*btf.Typedef{}, percpu: map[string]btf.Type{}, dupPercpu: map[string]bool{},
		refs: map[btf.Type]int{},
	}
	if err := x.collect(); err != nil {
		return ISFStats{}, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	st, err := x.write(bw)
	if err != nil {
		return st, err
	}
	return st, bw.Flush()
}

// collect reads every type of the BTF once.
func (x *isf) collect() error {
	var all []btf.Type
	for t, err := range x.in.Spec.All() {
		if err != nil {
			return fmt.Errorf("export: ISF: BTF: %w", err)
		}
		all = append(all, t)
	}
	ref := func(t btf.Type) {
		switch t := skipQual(t).(type) {
		case *btf.Struct, *btf.Union, *btf.Enum:
			x.refs[t]++
		}
	}
	for _, t := range all {
		switch t := t.(type) {
		case *btf.Struct:
			for _, m := range t.Members {
				ref(m.Type)
			}
		case *btf.Union:
			for _, m := range t.Members {
				ref(m.Type)
			}
		case *btf.Pointer:
			ref(t.Target)
		case *btf.Array:
			ref(t.Type)
		case *btf.Typedef:
			ref(t.Type)
		case *btf.Var:
			ref(t.Type)
		}
	}
	// One definition per struct/union tag and per enum name: the one
	// referred to most, the first on a tie.
	tags := map[string]btf.Type{}
	enums := map[string]*btf.Enum{}
	keep := func(prev btf.Type, seen bool, t btf.Type) bool {
		x.dups += btoi(seen)
		return !seen || x.refs[t] > x.refs[prev]
	}
	for _, t := range all {
		switch t := t.(type) {
		case *btf.Int:
			if _, ok := x.bases[t.Name]; !ok && t.Name != "" {
				x.bases[t.Name] = x.intBase(t)
			}
		case *btf.Float:
			if _, ok := x.bases[t.Name]; !ok && t.Name != "" {
				x.bases[t.Name] = isfBase{size: t.Size, signed: true, kind: "float"}
			}
		case *btf.Struct, *btf.Union:
			name := t.TypeName()
			if name == "" {
				name = x.unnamed(t)
				x.users[name] = t
			} else if prev, seen := tags[name]; keep(prev, seen, t) {
				tags[name] = t
			}
			x.names[t] = name
		case *btf.Enum:
			name := t.Name
			if name == "" {
				name = x.unnamed(t)
				x.enums[name] = t
			} else if prev, seen := enums[name]; keep(prev, seen, t) {
				enums[name] = t
			}
			x.names[t] = name
		case *btf.Typedef:
			if _, ok := x.typedefs[t.Name]; !ok {
				x.typedefs[t.Name] = t
			}
		case *btf.Datasec:
			if t.Name != ".data..percpu" {
				continue
			}
			for _, v := range t.Vars {
				if bv, ok := v.Type.(*btf.Var); ok {
					if _, seen := x.percpu[bv.Name]; seen {
						x.dupPercpu[bv.Name] = true
					}
					x.percpu[bv.Name] = bv.Type
				}
			}
		}
	}
	for name, t := range tags {
		x.users[name] = t
	}
	for name, e := range enums {
		x.enums[name] = e
	}
	// A typedef of an anonymous struct or union names it, as in dwarf2json,
	// unless a struct or union of that tag is written already.
	for _, t := range all {
		td, ok := t.(*btf.Typedef)
		if !ok {
			continue
		}
		switch c := td.Type.(type) {
		case *btf.Struct, *btf.Union:
			if c.TypeName() != "" {
				continue
			}
			if prev, taken := x.users[td.Name]; taken && prev != c {
				continue
			}
			x.users[td.Name] = c
			x.tdNames[td] = td.Name
		}
	}
	x.bases["void"] = isfBase{kind: "void"}
	x.bases["pointer"] = isfBase{size: uint32(x.in.Target.PtrSize), kind: "int"}
	return nil
}

// unnamed names an anonymous struct, union or enum by its BTF type ID.
func (x *isf) unnamed(t btf.Type) string {
	id, _ := x.in.Spec.TypeID(t) // t came from the Spec
	return fmt.Sprintf("unnamed_btf_%d", id)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// intBase is an integer type as volatility3 takes it: bool, char (plain
// char signed as the target's), or int.
func (x *isf) intBase(t *btf.Int) isfBase {
	b := isfBase{size: t.Size, signed: t.Encoding == btf.Signed, kind: "int"}
	switch {
	case t.Encoding == btf.Bool:
		b.kind, b.signed = "bool", false
	case t.Name == "char":
		b.kind, b.signed = "char", x.in.CharSigned
	case t.Name == "signed char":
		b.kind, b.signed = "char", true
	case t.Name == "unsigned char":
		b.kind, b.signed = "char", false
	}
	return b
}

// skipQual drops const, volatile, restrict and type tags.
func skipQual(t btf.Type) btf.Type {
	for range maxTypeDepth {
		switch q := t.(type) {
		case *btf.Const:
			t = q.Type
		case *btf.Volatile:
			t = q.Type
		case *btf.Restrict:
			t = q.Type
		case *btf.TypeTag:
			t = q.Type
		default:
			return t
		}
	}
	return t
}

var voidDesc = []byte(`{"kind":"base","name":"void"}`)

// desc appends the type descriptor of t to b.
func (x *isf) desc(b []byte, t btf.Type, depth int) []byte {
	if depth > maxTypeDepth {
		return append(b, voidDesc...)
	}
	switch t := skipQual(t).(type) {
	case *btf.Void:
		return append(b, voidDesc...)
	case *btf.Int:
		return appendBase(b, t.Name)
	case *btf.Float:
		return appendBase(b, t.Name)
	case *btf.Pointer:
		b = append(b, `{"kind":"pointer","subtype":`...)
		b = x.desc(b, t.Target, depth+1)
		return append(b, '}')
	case *btf.Array:
		b = append(b, `{"count":`...)
		b = strconv.AppendUint(b, uint64(t.Nelems), 10)
		b = append(b, `,"kind":"array","subtype":`...)
		b = x.desc(b, t.Type, depth+1)
		return append(b, '}')
	case *btf.Struct:
		return appendNamed(b, "struct", x.names[t])
	case *btf.Union:
		return appendNamed(b, "union", x.names[t])
	case *btf.Enum:
		return appendNamed(b, "enum", x.names[t])
	case *btf.Fwd:
		kind := "struct"
		if t.Kind == btf.FwdUnion {
			kind = "union"
		}
		return appendNamed(b, kind, t.Name)
	case *btf.Typedef:
		if name, ok := x.tdNames[t]; ok {
			kind := "struct"
			if _, u := t.Type.(*btf.Union); u {
				kind = "union"
			}
			return appendNamed(b, kind, name)
		}
		return x.desc(b, t.Type, depth+1)
	case *btf.FuncProto, *btf.Func:
		return append(b, `{"kind":"function"}`...)
	default:
		return append(b, voidDesc...)
	}
}

func appendBase(b []byte, name string) []byte {
	b = append(b, `{"kind":"base","name":`...)
	b = appendString(b, name)
	return append(b, '}')
}

func appendNamed(b []byte, kind, name string) []byte {
	b = append(b, `{"kind":"`...)
	b = append(b, kind...)
	b = append(b, `","name":`...)
	b = appendString(b, name)
	return append(b, '}')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always marshals; invalid UTF-8 becomes U+FFFD
	return append(b, q...)
}

// bitfieldDesc appends the descriptor of a bitfield member at bit offset
// off (from the struct's start) and returns it with the byte offset of its
// storage unit.
func (x *isf) bitfield(b []byte, m btf.Member) ([]byte, uint64, bool) {
	under := skipQual(m.Type)
	for range maxTypeDepth {
		td, ok := under.(*btf.Typedef)
		if !ok {
			break
		}
		under = skipQual(td.Type)
	}
	var size uint64
	switch u := under.(type) {
	case *btf.Int:
		size = uint64(u.Size)
	case *btf.Enum:
		size = uint64(u.Size)
	default:
		return b, 0, false // the schema allows base and enum bitfields only
	}
	off, n := uint64(m.Offset), uint64(m.BitfieldSize)
	if size == 0 || n == 0 || n > 8*size {
		return b, 0, false
	}
	unit := off / (8 * size) * size // byte offset of the aligned unit
	pos := off - 8*unit
	if pos+n > 8*size { // straddles: count from its first byte
		unit, pos = off/8, off%8
		if pos+n > 8*size {
			return b, 0, false
		}
	}
	if x.in.Target.ByteOrder == binary.BigEndian {
		pos = 8*size - pos - n
	}
	b = append(b, `{"bit_length":`...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, `,"bit_position":`...)
	b = strconv.AppendUint(b, pos, 10)
	b = append(b, `,"kind":"bitfield","type":`...)
	b = x.desc(b, under, 0)
	return append(b, '}'), unit, true
}

// userType appends one user type's value.
func (x *isf) userType(b []byte, t btf.Type) []byte {
	var kind string
	var size uint32
	var members []btf.Member
	switch t := t.(type) {
	case *btf.Struct:
		kind, size, members = "struct", t.Size, t.Members
	case *btf.Union:
		kind, size, members = "union", t.Size, t.Members
	}
	type field struct {
		name string
		val  []byte
	}
	fields := make([]field, 0, len(members))
	anon := 0
	for _, m := range members {
		var v []byte
		name := m.Name
		anonymous := false
		if name == "" {
			switch skipQual(m.Type).(type) {
			case *btf.Struct, *btf.Union:
			default:
				continue // unnamed padding bitfield
			}
			name = fmt.Sprintf("unnamed_field_%x", anon)
			anon++
			anonymous = true
		}
		off := uint64(m.Offset) / 8
		v = append(v, '{')
		if anonymous {
			v = append(v, `"anonymous":true,`...)
		}
		if m.BitfieldSize > 0 {
			var ok bool
			var desc []byte
			desc, off, ok = x.bitfield(nil, m)
			if !ok {
				continue
			}
			v = append(v, `"offset":`...)
			v = strconv.AppendUint(v, off, 10)
			v = append(v, `,"type":`...)
			v = append(v, desc...)
		} else {
			v = append(v, `"offset":`...)
			v = strconv.AppendUint(v, off, 10)
			v = append(v, `,"type":`...)
			v = x.desc(v, m.Type, 0)
		}
		fields = append(fields, field{name, append(v, '}')})
	}
	slices.SortStableFunc(fields, func(a, b field) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	b = append(b, `{"fields":{`...)
	for i, f := range fields {
		if i > 0 && fields[i-1].name == f.name {
			continue // a name twice in one struct is not C; keep the first
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.name)
		b = append(b, ':')
		b = append(b, f.val...)
	}
	b = append(b, `},"kind":"`...)
	b = append(b, kind...)
	b = append(b, `","size":`...)
	b = strconv.AppendUint(b, uint64(size), 10)
	return append(b, '}')
}

// enumBase is the base type an enum's values are stored as: the first
// (by name) integer base type of its size and signedness, else void.
func (x *isf) enumBase(e *btf.Enum) string {
	signed := e.Signed
	if x.baseNames == nil {
		x.baseNames = sortedKeys(x.bases)
	}
	for _, n := range x.baseNames {
		bt := x.bases[n]
		if bt.kind == "int" && n != "pointer" && bt.size == e.Size && bt.signed == signed {
			return n
		}
	}
	return "void"
}

func (x *isf) enumValue(b []byte, e *btf.Enum) []byte {
	b = append(b, `{"base":`...)
	b = appendString(b, x.enumBase(e))
	b = append(b, `,"constants":{`...)
	vals := slices.Clone(e.Values)
	slices.SortStableFunc(vals, func(a, b btf.EnumValue) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for i, v := range vals {
		if i > 0 && vals[i-1].Name == v.Name {
			continue
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v.Name)
		b = append(b, ':')
		if e.Signed {
			// cilium/ebpf sign-extends a signed enum's values to 64 bits.
			b = strconv.AppendInt(b, int64(v.Value), 10)
		} else {
			b = strconv.AppendUint(b, v.Value, 10)
		}
	}
	b = append(b, `},"size":`...)
	b = strconv.AppendUint(b, uint64(e.Size), 10)
	return append(b, '}')
}

// symbolType appends the descriptor of a symbol's type from
// isfSymbolTypes, or reports it unknown.
func (x *isf) symbolType(b []byte, st isfSymbolType) ([]byte, bool) {
	var base []byte
	switch {
	case len(st.base) > 7 && st.base[:7] == "struct ":
		name := st.base[7:]
		if _, ok := x.users[name].(*btf.Struct); !ok {
			return b, false
		}
		base = appendNamed(nil, "struct", name)
	case len(st.base) > 6 && st.base[:6] == "union ":
		name := st.base[6:]
		if _, ok := x.users[name].(*btf.Union); !ok {
			return b, false
		}
		base = appendNamed(nil, "union", name)
	default:
		if _, ok := x.bases[st.base]; ok {
			base = appendBase(nil, st.base)
		} else if td, ok := x.typedefs[st.base]; ok {
			base = x.desc(nil, td, 0)
		} else {
			return b, false
		}
	}
	if st.array {
		b = append(b, `{"count":`...)
		b = strconv.AppendInt(b, int64(st.count), 10)
		b = append(b, `,"kind":"array","subtype":`...)
	}
	for range st.ptr {
		b = append(b, `{"kind":"pointer","subtype":`...)
	}
	b = append(b, base...)
	for range st.ptr {
		b = append(b, '}')
	}
	if st.array {
		b = append(b, '}')
	}
	return b, true
}

type isfSym struct {
	addr   uint64
	global bool
}

func isGlobal(k byte) bool { return k >= 'A' && k <= 'Z' }

func (x *isf) write(w *bufio.Writer) (ISFStats, error) {
	st := ISFStats{Duplicates: x.dups}
	var b []byte
	flush := func() error {
		_, err := w.Write(b)
		b = b[:0]
		return err
	}
	b = append(b, `{"base_types":{`...)
	for i, name := range sortedKeys(x.bases) {
		bt := x.bases[name]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, `:{"endian":"`...)
		if x.in.Target.ByteOrder == binary.BigEndian {
			b = append(b, "big"...)
		} else {
			b = append(b, "little"...)
		}
		b = append(b, `","kind":"`...)
		b = append(b, bt.kind...)
		b = append(b, `","signed":`...)
		b = strconv.AppendBool(b, bt.signed)
		b = append(b, `,"size":`...)
		b = strconv.AppendUint(b, uint64(bt.size), 10)
		b = append(b, '}')
		st.BaseTypes++
	}
	b = append(b, `},"enums":{`...)
	for i, name := range sortedKeys(x.enums) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ':')
		b = x.enumValue(b, x.enums[name])
		st.Enums++
		if len(b) > 1<<16 {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	b = append(b, `},"metadata":{"format":"`+ISFFormat+`","linux":{"symbols":[{"kind":"symtab","name":"kallsyms"}]},"producer":{"name":`...)
	b = appendString(b, x.in.Producer)
	b = append(b, `,"version":`...)
	b = appendString(b, x.in.Version)
	b = append(b, `}},"symbols":{`...)

	syms := map[string]isfSym{}
	for _, s := range x.in.Symbols {
		if s.Name == "" {
			continue
		}
		k := byte(s.Kind)
		prev, seen := syms[s.Name]
		if seen && (prev.global || !isGlobal(k)) {
			continue
		}
		addr := s.Addr
		if k != 'a' && k != 'A' {
			addr -= x.in.KASLROffset
		}
		syms[s.Name] = isfSym{addr: addr, global: isGlobal(k)}
	}
	for i, name := range sortedKeys(syms) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, `:{"address":`...)
		b = strconv.AppendUint(b, syms[name].addr, 10)
		typed := false
		if name == "linux_banner" && x.in.Banner != nil {
			b = append(b, `,"constant_data":"`...)
			b = base64.StdEncoding.AppendEncode(b, x.in.Banner)
			b = append(b, `","type":`...)
			b, typed = x.symbolType(b, isfSymbolType{base: "char", array: true, count: len(x.in.Banner)})
			if !typed { // no char in the BTF: say so with void
				b = append(b, voidDesc...)
			}
			typed = true
		} else if t, ok := isfSymbolTypes[name]; ok {
			mark := len(b)
			b = append(b, `,"type":`...)
			if b, typed = x.symbolType(b, t); !typed {
				b = b[:mark]
			}
		} else if t, ok := x.percpu[name]; ok && !x.dupPercpu[name] {
			b = append(b, `,"type":`...)
			b = x.desc(b, t, 0)
			typed = true
		}
		if typed {
			st.TypedSymbols++
		}
		b = append(b, '}')
		st.Symbols++
		if len(b) > 1<<16 {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	b = append(b, `},"user_types":{`...)
	for i, name := range sortedKeys(x.users) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ':')
		b = x.userType(b, x.users[name])
		st.UserTypes++
		if len(b) > 1<<16 {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	b = append(b, "}}\n"...)
	return st, flush()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
