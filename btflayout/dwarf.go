package btflayout

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// DWARF is a Source backed by debug info (a vmlinux built with
// CONFIG_DEBUG_INFO, or its separate debug file). The first lookup indexes
// every named struct, union and enum type in one pass over the info; later
// lookups are map hits. It is safe for concurrent use.
type DWARF struct {
	desc string
	d    *dwarf.Data

	once    sync.Once
	index   map[string][]dwarf.Offset // struct/union/enum name → definitions
	idxErr  error
	mu      sync.Mutex
	structs map[string][]*Struct
}

// maxDefs bounds how many definitions of one type name are kept: vmlinux
// repeats struct module in every compilation unit that includes it.
const maxDefs = 4

// FromDWARF returns a Source over d. desc names it in messages.
func FromDWARF(d *dwarf.Data, desc string) *DWARF {
	return &DWARF{desc: desc, d: d, structs: map[string][]*Struct{}}
}

// Describe implements Source.
func (x *DWARF) Describe() string { return x.desc }

func (x *DWARF) buildIndex() {
	x.index = map[string][]dwarf.Offset{}
	r := x.d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			x.idxErr = fmt.Errorf("btflayout: %s: %w: %w", x.desc, ErrCorrupt, err)
			return
		}
		if e == nil {
			return
		}
		switch e.Tag {
		case dwarf.TagStructType, dwarf.TagUnionType, dwarf.TagEnumerationType:
		default:
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl || name == "" {
			continue
		}
		if len(x.index[name]) < maxDefs {
			x.index[name] = append(x.index[name], e.Offset)
		}
	}
}

func (x *DWARF) lookup(name string) ([]dwarf.Offset, error) {
	x.once.Do(x.buildIndex)
	if x.idxErr != nil {
		return nil, x.idxErr
	}
	return x.index[name], nil
}

// Struct implements Source.
func (x *DWARF) Struct(name string, need ...string) (*Struct, error) {
	offs, err := x.lookup(name)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	cands, ok := x.structs[name]
	if !ok {
		for _, off := range offs {
			t, err := x.d.Type(off)
			if err != nil {
				return nil, fmt.Errorf("btflayout: %s: struct %s: %w: %w", x.desc, name, ErrCorrupt, err)
			}
			if st, ok := t.(*dwarf.StructType); ok && !st.Incomplete {
				cands = append(cands, &Struct{Name: name, Size: uint64(max(st.ByteSize, 0)), fields: flattenDWARF(nil, st, 0)})
			}
		}
		x.structs[name] = cands
	}
	for _, s := range cands {
		if s.Has(need...) {
			return s, nil
		}
	}
	return nil, notFound(x, needDesc(name, need))
}

// Enum implements Source.
func (x *DWARF) Enum(name string) (map[string]int64, error) {
	offs, err := x.lookup(name)
	if err != nil {
		return nil, err
	}
	for _, off := range offs {
		t, err := x.d.Type(off)
		if err != nil {
			return nil, fmt.Errorf("btflayout: %s: enum %s: %w: %w", x.desc, name, ErrCorrupt, err)
		}
		if et, ok := t.(*dwarf.EnumType); ok {
			out := make(map[string]int64, len(et.Val))
			for _, v := range et.Val {
				out[v.Name] = v.Val
			}
			return out, nil
		}
	}
	return nil, notFound(x, "enum "+name)
}

func underlyingDWARF(t dwarf.Type) dwarf.Type {
	for range 64 {
		switch u := t.(type) {
		case *dwarf.TypedefType:
			t = u.Type
		case *dwarf.QualType:
			t = u.Type
		default:
			return t
		}
	}
	return t
}

func dwarfName(t dwarf.Type) string {
	switch u := underlyingDWARF(t).(type) {
	case *dwarf.StructType:
		return u.StructName
	case *dwarf.EnumType:
		return u.EnumName
	case nil:
		return ""
	default:
		return u.Common().Name
	}
}

func flattenDWARF(out []Field, st *dwarf.StructType, base uint64) []Field {
	for _, m := range st.Field {
		off := base + uint64(max(m.ByteOffset, 0))
		bitOff := off * 8
		if m.DataBitOffset > 0 {
			off = base + uint64(m.DataBitOffset)/8
			bitOff = base*8 + uint64(m.DataBitOffset)
		}
		if m.Name == "" {
			if inner, ok := underlyingDWARF(m.Type).(*dwarf.StructType); ok {
				out = flattenDWARF(out, inner, off)
			}
			continue
		}
		f := Field{Name: m.Name, Offset: off}
		if m.BitSize > 0 {
			f.BitOffset, f.BitSize = bitOff, uint64(m.BitSize)
		}
		if n := m.Type.Size(); n > 0 {
			f.Size = uint64(n)
		}
		switch t := underlyingDWARF(m.Type).(type) {
		case *dwarf.IntType, *dwarf.UintType, *dwarf.CharType, *dwarf.UcharType, *dwarf.BoolType:
			f.Kind = KindInt
		case *dwarf.PtrType:
			f.Kind = KindPointer
			f.TypeName = dwarfName(t.Type)
		case *dwarf.ArrayType:
			f.Kind = KindArray
			f.TypeName = dwarfName(t.Type)
			if t.Count > 0 {
				f.Count = uint64(t.Count)
			}
			if n := t.Type.Size(); n > 0 {
				f.ElemSize = uint64(n)
			}
		case *dwarf.StructType:
			f.Kind, f.TypeName = KindStruct, t.StructName
			if t.Kind == "union" {
				f.Kind = KindUnion
			}
		case *dwarf.EnumType:
			f.Kind, f.TypeName = KindEnum, t.EnumName
		default:
			f.Kind = KindOther
		}
		out = append(out, f)
	}
	return out
}

// Open reads struct layouts from a file: a raw BTF blob (such as a copy of
// /sys/kernel/btf/vmlinux), or an ELF file (a vmlinux) with a .BTF section
// (preferred: small and fast) or DWARF debug info. A file with neither is
// an error wrapping ErrNotFound.
func Open(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("btflayout: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return nil, fmt.Errorf("btflayout: %s: %w", path, err)
	}
	if magic[0] == 0x9f && magic[1] == 0xeb || magic[0] == 0xeb && magic[1] == 0x9f {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("btflayout: %w", err)
		}
		if st.Size() > MaxBTFSize {
			return nil, fmt.Errorf("btflayout: %s: %d bytes exceeds the BTF cap of %d: %w", path, st.Size(), MaxBTFSize, ErrCorrupt)
		}
		raw := make([]byte, st.Size())
		if _, err := f.ReadAt(raw, 0); err != nil {
			return nil, fmt.Errorf("btflayout: %s: %w", path, err)
		}
		return ParseBTF(raw, "BTF from "+path)
	}
	if string(magic[:]) != elf.ELFMAG {
		return nil, fmt.Errorf("btflayout: %s: neither BTF nor ELF: %w", path, ErrCorrupt)
	}
	return openELF(f, path)
}

func openELF(r io.ReaderAt, path string) (src Source, err error) {
	defer func() {
		// debug/elf and debug/dwarf are not hardened against every input.
		if p := recover(); p != nil {
			src, err = nil, fmt.Errorf("btflayout: %s: %w: %v", path, ErrCorrupt, p)
		}
	}()
	ef, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("btflayout: %s: %w: %w", path, ErrCorrupt, err)
	}
	if sec := ef.Section(".BTF"); sec != nil && sec.Type != elf.SHT_NOBITS {
		if sec.Size > MaxBTFSize {
			return nil, fmt.Errorf("btflayout: %s: .BTF of %d bytes exceeds the cap of %d: %w", path, sec.Size, MaxBTFSize, ErrCorrupt)
		}
		raw, err := sec.Data()
		if err != nil {
			return nil, fmt.Errorf("btflayout: %s: .BTF: %w", path, err)
		}
		return ParseBTF(raw, "BTF from "+path)
	}
	d, err := ef.DWARF()
	if err != nil {
		if errors.Is(err, io.EOF) || ef.Section(".debug_info") == nil && ef.Section(".zdebug_info") == nil {
			return nil, fmt.Errorf("btflayout: %s has neither .BTF nor DWARF: %w", path, ErrNotFound)
		}
		return nil, fmt.Errorf("btflayout: %s: DWARF: %w: %w", path, ErrCorrupt, err)
	}
	return FromDWARF(d, "DWARF from "+path), nil
}
