package btflayout

import (
	"fmt"
	"slices"
)

// Kind is the broad C type of a field.
type Kind uint8

// Field kinds. KindUnknown is what a layout table reports: it gives offsets
// and sizes only.
const (
	KindUnknown Kind = iota
	KindInt
	KindPointer
	KindArray
	KindStruct
	KindUnion
	KindEnum
	KindOther
)

var kindNames = [...]string{"unknown", "int", "pointer", "array", "struct", "union", "enum", "other"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Field is one member of a struct, as seen from the start of the outermost
// struct.
type Field struct {
	Name string
	// Offset is the byte offset of the field (of the byte holding its first
	// bit, for a bitfield).
	Offset uint64
	// Size is the field's size in bytes (the whole array for an array, the
	// storage unit for a bitfield); 0 when the source does not say.
	Size uint64
	// BitOffset and BitSize describe a bitfield: BitOffset counts bits from
	// the start of the struct. BitSize is 0 for ordinary fields.
	BitOffset uint64
	BitSize   uint64
	Kind      Kind
	// TypeName names the field's struct, union or enum type; for a pointer
	// or an array, that of the pointee or element type. "" when anonymous,
	// scalar or unknown.
	TypeName string
	// Count is the number of elements of an array field, ElemSize the size
	// of one; both 0 for other fields.
	Count    uint64
	ElemSize uint64
}

// Struct is a struct (or union) type with its fields flattened.
type Struct struct {
	Name string
	// Size is sizeof(struct); 0 when the source does not say (a table
	// without a sizeof line).
	Size   uint64
	fields []Field // declaration order
}

// NewStruct returns a struct of the given fields. It is how callers and
// tests build layouts of their own.
func NewStruct(name string, size uint64, fields ...Field) *Struct {
	return &Struct{Name: name, Size: size, fields: slices.Clone(fields)}
}

// Fields returns the fields in declaration order (anonymous members
// flattened in place).
func (s *Struct) Fields() []Field { return slices.Clone(s.fields) }

// Field returns the named field. Like C, the first field of that name in
// declaration order wins.
func (s *Struct) Field(name string) (Field, bool) {
	for _, f := range s.fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Has reports whether every named field exists.
func (s *Struct) Has(names ...string) bool {
	for _, n := range names {
		if _, ok := s.Field(n); !ok {
			return false
		}
	}
	return true
}

// MustField is Field returning an error wrapping ErrNotFound that names the
// struct and field.
func (s *Struct) MustField(name string) (Field, error) {
	if f, ok := s.Field(name); ok {
		return f, nil
	}
	return Field{}, fmt.Errorf("btflayout: struct %s has no field %s: %w", s.Name, name, ErrNotFound)
}

// End returns the offset just past the last byte of any field: how much
// of the struct must be read to see every field when Size is unknown.
func (s *Struct) End() uint64 {
	var end uint64
	for _, f := range s.fields {
		size := f.Size
		if size == 0 {
			size = 8
		}
		end = max(end, f.Offset+size)
	}
	return max(end, s.Size)
}

// Source describes the types of one kernel build.
type Source interface {
	// Describe names the source for messages ("vmlinux BTF in the dump",
	// "DWARF from vmlinux-6.1", "layout table t.txt").
	Describe() string
	// Struct returns the struct (or union) named name that has every field
	// in need. vmlinux BTF may hold several types of one name (for example
	// when deduplication failed); the first that has the needed fields is
	// returned. An unknown name, or none with the fields, is an error
	// wrapping ErrNotFound.
	Struct(name string, need ...string) (*Struct, error)
	// Enum returns the constants of the named enum type. An unknown type is
	// an error wrapping ErrNotFound.
	Enum(name string) (map[string]int64, error)
}

func notFound(src Source, what string) error {
	return fmt.Errorf("btflayout: %s: %s: %w", src.Describe(), what, ErrNotFound)
}

func needDesc(name string, need []string) string {
	if len(need) == 0 {
		return "struct " + name
	}
	return fmt.Sprintf("struct %s with fields %v", name, need)
}
