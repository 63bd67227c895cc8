package btflayout

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// rawBTF answers by-name struct, union and enum lookups straight from a BTF
// blob, decoding only the types a lookup reaches. Opening it walks the type
// records once, checking each record's kind and bounds, and keeps the
// offset of every type (4 bytes a type) and the name offset of every named
// struct, union and enum (8 bytes each); a lookup finds its name in the
// string table, picks the types that carry that name offset, and decodes
// their members, resolving each member's type through typedefs and
// qualifiers as cilium/ebpf's UnderlyingType and Sizeof do. The vmlinux BTF
// of a 6.12 kernel has ~150k types, of which the module decoders ask for a
// dozen: inflating all of them into a cilium/ebpf Spec cost ~17 ms and
// 9.5 MB, most of it for types nobody asks about.
type rawBTF struct {
	bo    binary.ByteOrder
	types []byte   // the type section
	strs  []byte   // the string section
	offs  []uint32 // offs[id-1]: where type id starts in types
	named []uint64 // name_off<<32 | id of every named struct, union and enum

	indexOnce sync.Once
	index     []uint32 // see buildIndex
}

// BTF kinds (uapi linux/btf.h).
const (
	btfKindInt      = 1
	btfKindPtr      = 2
	btfKindArray    = 3
	btfKindStruct   = 4
	btfKindUnion    = 5
	btfKindEnum     = 6
	btfKindFwd      = 7
	btfKindTypedef  = 8
	btfKindVolatile = 9
	btfKindConst    = 10
	btfKindRestrict = 11
	btfKindFunc     = 12
	btfKindFuncProt = 13
	btfKindVar      = 14
	btfKindDatasec  = 15
	btfKindFloat    = 16
	btfKindDeclTag  = 17
	btfKindTypeTag  = 18
	btfKindEnum64   = 19
)

// btfTypeLen is the size of struct btf_type; kind-specific data follows.
const btfTypeLen = 12

// kindShapes gives, by kind, the bytes of kind-specific data after struct
// btf_type: fixed plus perVlen for each of vlen entries. A table, not a
// switch: the walk over ~150k records of mixed kinds is branch-bound.
var kindShapes = [32]struct {
	fixed, perVlen uint8
	ok             bool
}{
	btfKindInt: {4, 0, true}, btfKindPtr: {0, 0, true}, btfKindArray: {12, 0, true},
	btfKindStruct: {0, 12, true}, btfKindUnion: {0, 12, true}, btfKindEnum: {0, 8, true},
	btfKindFwd: {0, 0, true}, btfKindTypedef: {0, 0, true}, btfKindVolatile: {0, 0, true},
	btfKindConst: {0, 0, true}, btfKindRestrict: {0, 0, true}, btfKindFunc: {0, 0, true},
	btfKindFuncProt: {0, 8, true}, btfKindVar: {4, 0, true}, btfKindDatasec: {0, 12, true},
	btfKindFloat: {0, 0, true}, btfKindDeclTag: {4, 0, true}, btfKindTypeTag: {0, 0, true},
	btfKindEnum64: {0, 12, true},
}

// maxResolveDepth bounds chains of typedefs, qualifiers and arrays, as
// cilium/ebpf's does (32), so that a cycle ends.
const maxResolveDepth = 32

// newRawBTF checks the header of raw (see header) and walks its type
// records. A malformed blob is an error wrapping ErrCorrupt naming the
// offset of the record at fault.
func newRawBTF(raw []byte) (*rawBTF, error) {
	bo, total, err := header(raw)
	if err != nil {
		return nil, err
	}
	if total > uint64(len(raw)) {
		return nil, fmt.Errorf("btflayout: BTF header describes %d bytes, blob has %d: %w", total, len(raw), ErrCorrupt)
	}
	hdrLen := uint64(bo.Uint32(raw[4:]))
	typeOff, typeLen := uint64(bo.Uint32(raw[8:])), uint64(bo.Uint32(raw[12:]))
	strOff, strLen := uint64(bo.Uint32(raw[16:])), uint64(bo.Uint32(raw[20:]))
	body := raw[hdrLen:total]
	r := &rawBTF{bo: bo, types: body[typeOff : typeOff+typeLen], strs: body[strOff : strOff+strLen]}
	if len(r.strs) == 0 || r.strs[0] != 0 || r.strs[len(r.strs)-1] != 0 {
		return nil, fmt.Errorf("btflayout: BTF string section at %#x: does not start and end with NUL: %w", hdrLen+strOff, ErrCorrupt)
	}
	big := bo == binary.BigEndian
	// Every type is at least 12 bytes: that bounds the offsets table.
	r.offs = make([]uint32, 0, len(r.types)/btfTypeLen)
	for off := 0; off < len(r.types); {
		if len(r.types)-off < btfTypeLen {
			return nil, fmt.Errorf("btflayout: BTF type %d at %#x: truncated record: %w", len(r.offs)+1, hdrLen+typeOff+uint64(off), ErrCorrupt)
		}
		// Little-endian loads, swapped for a big-endian blob: a call
		// through binary.ByteOrder per field was half of the walk.
		nameOff, info := binary.LittleEndian.Uint32(r.types[off:]), binary.LittleEndian.Uint32(r.types[off+4:])
		if big {
			nameOff, info = bits.ReverseBytes32(nameOff), bits.ReverseBytes32(info)
		}
		kind, vlen := info>>24&0x1f, int(info&0xffff)
		shape := kindShapes[kind]
		if !shape.ok {
			return nil, fmt.Errorf("btflayout: BTF type %d at %#x: kind %d: %w", len(r.offs)+1, hdrLen+typeOff+uint64(off), kind, ErrCorrupt)
		}
		extra := int(shape.fixed) + int(shape.perVlen)*vlen
		if nameOff >= uint32(len(r.strs)) || len(r.types)-off-btfTypeLen < extra {
			return nil, fmt.Errorf("btflayout: BTF type %d at %#x: name offset %#x or %d bytes of members out of bounds: %w", len(r.offs)+1, hdrLen+typeOff+uint64(off), nameOff, extra, ErrCorrupt)
		}
		id := len(r.offs) + 1
		r.offs = append(r.offs, uint32(off))
		if nameOff != 0 && (kind == btfKindStruct || kind == btfKindUnion || kind == btfKindEnum || kind == btfKindEnum64) {
			r.named = append(r.named, uint64(nameOff)<<32|uint64(id))
		}
		off += btfTypeLen + extra
	}
	return r, nil
}

// rawType is one decoded struct btf_type header.
type rawType struct {
	id       uint32
	name     uint32
	kind     uint32
	vlen     int
	kindFlag bool
	sizeType uint32 // size or type, by kind
	data     []byte // kind-specific data
}

func (r *rawBTF) typ(id uint32) (rawType, error) {
	if id == 0 || int(id) > len(r.offs) {
		return rawType{}, fmt.Errorf("btflayout: BTF type id %d of %d: %w", id, len(r.offs), ErrCorrupt)
	}
	off := int(r.offs[id-1])
	b := r.types[off:]
	info := r.bo.Uint32(b[4:])
	t := rawType{id: id, name: r.bo.Uint32(b), kind: info >> 24 & 0x1f, vlen: int(info & 0xffff), kindFlag: info>>31 != 0, sizeType: r.bo.Uint32(b[8:])}
	next := len(r.types)
	if int(id) < len(r.offs) {
		next = int(r.offs[id])
	}
	t.data = r.types[off+btfTypeLen : next]
	return t, nil
}

// str returns the NUL-terminated string at off; the walk checked that off
// is inside the section, which ends with NUL.
func (r *rawBTF) str(off uint32) string { return string(r.strBytes(off)) }

// byName returns the ids of the named structs, unions and enums called
// name, in id order.
func (r *rawBTF) byName(name string) []uint32 {
	r.indexOnce.Do(r.buildIndex)
	mask := uint32(len(r.index) - 1)
	var ids []uint32
	for h := nameHash([]byte(name)) & mask; r.index[h] != 0; h = (h + 1) & mask {
		e := r.named[r.index[h]-1]
		if r.strAt(uint32(e>>32)) == name {
			ids = append(ids, uint32(e))
		}
	}
	slices.Sort(ids)
	return ids
}

// buildIndex hashes the names of r.named into r.index, an open-addressed
// table of indexes into r.named plus one (0 is empty) at most half full:
// for the ~25k named structs, unions and enums of a 6.12 kernel about
// 0.3 ms and 256 KiB once, against a search of the 2 MiB string table
// per lookup.
func (r *rawBTF) buildIndex() {
	size := 16
	for size < 2*len(r.named) {
		size *= 2
	}
	r.index = make([]uint32, size)
	mask := uint32(size - 1)
	for i, e := range r.named {
		h := nameHash(r.strBytes(uint32(e>>32))) & mask
		for r.index[h] != 0 {
			h = (h + 1) & mask
		}
		r.index[h] = uint32(i + 1)
	}
}

// nameHash is 32-bit FNV-1a.
func nameHash(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// strBytes is str without the copy.
func (r *rawBTF) strBytes(off uint32) []byte {
	s := r.strs[off:]
	return s[:bytes.IndexByte(s, 0)]
}

// strAt is str for a comparison, which does not allocate.
func (r *rawBTF) strAt(off uint32) string { return string(r.strBytes(off)) }

// underlying skips typedefs and qualifiers, as cilium/ebpf's
// UnderlyingType does; id 0 is void.
func (r *rawBTF) underlying(id uint32) (rawType, bool, error) {
	for range maxResolveDepth {
		if id == 0 {
			return rawType{}, false, nil
		}
		t, err := r.typ(id)
		if err != nil {
			return rawType{}, false, err
		}
		switch t.kind {
		case btfKindTypedef, btfKindVolatile, btfKindConst, btfKindRestrict, btfKindTypeTag:
			id = t.sizeType
			continue
		}
		return t, true, nil
	}
	return rawType{}, false, fmt.Errorf("btflayout: BTF type %d: a chain of more than %d typedefs or qualifiers: %w", id, maxResolveDepth, ErrCorrupt)
}

// sizeof is cilium/ebpf's Sizeof: arrays multiply, typedefs and
// qualifiers pass through, pointers are 8 bytes; ok is false for a type
// without a size (void, functions, a cycle).
func (r *rawBTF) sizeof(id uint32) (uint64, bool) {
	n := uint64(1)
	for range maxResolveDepth {
		if id == 0 {
			return 0, false
		}
		t, err := r.typ(id)
		if err != nil {
			return 0, false
		}
		switch t.kind {
		case btfKindArray:
			elems := uint64(r.bo.Uint32(t.data[8:]))
			if elems != 0 && n > (1<<63)/elems {
				return 0, false
			}
			n *= elems
			id = r.bo.Uint32(t.data)
			continue
		case btfKindTypedef, btfKindVolatile, btfKindConst, btfKindRestrict, btfKindTypeTag:
			id = t.sizeType
			continue
		case btfKindPtr:
			return n * 8, true
		case btfKindInt, btfKindStruct, btfKindUnion, btfKindEnum, btfKindEnum64, btfKindDatasec, btfKindFloat:
			e := uint64(t.sizeType)
			if e != 0 && n > (1<<63)/e {
				return 0, false
			}
			return n * e, true
		}
		return 0, false
	}
	return 0, false
}

// typeName is cilium/ebpf's TypeName of a decoded type: the name of the
// named kinds, "" for the others.
func (r *rawBTF) typeName(t rawType, ok bool) string {
	if !ok {
		return ""
	}
	switch t.kind {
	case btfKindPtr, btfKindArray, btfKindVolatile, btfKindConst, btfKindRestrict, btfKindFuncProt, btfKindDeclTag, btfKindTypeTag:
		return ""
	}
	return r.str(t.name)
}

// members appends the fields of struct or union t whose start lies
// baseBits into the outermost struct, descending into anonymous members,
// as flatten did over cilium/ebpf's types. depth bounds the nesting.
func (r *rawBTF) members(out []Field, t rawType, baseBits uint64, depth int) ([]Field, error) {
	if depth > maxResolveDepth {
		return nil, fmt.Errorf("btflayout: BTF type %d: anonymous members nested more than %d deep: %w", t.id, maxResolveDepth, ErrCorrupt)
	}
	for i := range t.vlen {
		m := t.data[12*i:]
		nameOff, mtype, moff := r.bo.Uint32(m), r.bo.Uint32(m[4:]), r.bo.Uint32(m[8:])
		if nameOff >= uint32(len(r.strs)) {
			return nil, fmt.Errorf("btflayout: BTF type %d member %d: name offset %#x: %w", t.id, i, nameOff, ErrCorrupt)
		}
		off, bits := uint64(moff), uint64(0)
		if t.kindFlag {
			off, bits = uint64(moff&0xffffff), uint64(moff>>24)
		} else if it, err := r.typ(mtype); err == nil && it.kind == btfKindInt && len(it.data) >= 4 {
			// A legacy bitfield: the int type carries offset and width.
			enc := r.bo.Uint32(it.data)
			ioff, ibits := uint64(enc>>16&0xff), uint64(enc&0xff)
			if ioff > 0 || ibits != 8*uint64(it.sizeType) {
				off, bits = off+ioff, ibits
			}
		}
		off += baseBits
		u, ok, err := r.underlying(mtype)
		if err != nil {
			return nil, err
		}
		if nameOff == 0 {
			if ok && (u.kind == btfKindStruct || u.kind == btfKindUnion) {
				if out, err = r.members(out, u, off, depth+1); err != nil {
					return nil, err
				}
			}
			continue
		}
		f := Field{Name: r.str(nameOff), Offset: off / 8}
		if bits > 0 {
			f.BitOffset, f.BitSize = off, bits
		}
		if n, ok := r.sizeof(mtype); ok {
			f.Size = n
		}
		switch {
		case !ok:
			f.Kind = KindOther
		case u.kind == btfKindInt:
			f.Kind = KindInt
		case u.kind == btfKindPtr:
			f.Kind = KindPointer
			pt, pok, err := r.underlying(u.sizeType)
			if err != nil {
				return nil, err
			}
			f.TypeName = r.typeName(pt, pok)
		case u.kind == btfKindArray:
			f.Kind = KindArray
			elem := r.bo.Uint32(u.data)
			f.Count = uint64(r.bo.Uint32(u.data[8:]))
			et, eok, err := r.underlying(elem)
			if err != nil {
				return nil, err
			}
			f.TypeName = r.typeName(et, eok)
			if n, ok := r.sizeof(elem); ok {
				f.ElemSize = n
			}
		case u.kind == btfKindStruct:
			f.Kind, f.TypeName = KindStruct, r.str(u.name)
		case u.kind == btfKindUnion:
			f.Kind, f.TypeName = KindUnion, r.str(u.name)
		case u.kind == btfKindEnum || u.kind == btfKindEnum64:
			f.Kind, f.TypeName = KindEnum, r.str(u.name)
		default:
			f.Kind = KindOther
		}
		out = append(out, f)
	}
	return out, nil
}

// structs returns every struct and union called name, decoded.
func (r *rawBTF) structs(name string) ([]*Struct, error) {
	var out []*Struct
	for _, id := range r.byName(name) {
		t, err := r.typ(id)
		if err != nil {
			return nil, err
		}
		if t.kind != btfKindStruct && t.kind != btfKindUnion {
			continue
		}
		fields, err := r.members(nil, t, 0, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, &Struct{Name: name, Size: uint64(t.sizeType), fields: fields})
	}
	return out, nil
}

// enum returns the values of the first enum called name (ENUM or ENUM64;
// a signed ENUM's values are sign-extended, as cilium/ebpf does), or ok
// false.
func (r *rawBTF) enum(name string) (map[string]int64, bool, error) {
	for _, id := range r.byName(name) {
		t, err := r.typ(id)
		if err != nil {
			return nil, false, err
		}
		stride := 8
		switch t.kind {
		case btfKindEnum:
		case btfKindEnum64:
			stride = 12
		default:
			continue
		}
		out := make(map[string]int64, t.vlen)
		for i := range t.vlen {
			v := t.data[stride*i:]
			nameOff := r.bo.Uint32(v)
			if nameOff >= uint32(len(r.strs)) {
				return nil, false, fmt.Errorf("btflayout: BTF enum %s value %d: name offset %#x: %w", name, i, nameOff, ErrCorrupt)
			}
			var val uint64
			if t.kind == btfKindEnum64 {
				val = uint64(r.bo.Uint32(v[4:])) | uint64(r.bo.Uint32(v[8:]))<<32
			} else if t.kindFlag {
				val = uint64(int32(r.bo.Uint32(v[4:])))
			} else {
				val = uint64(r.bo.Uint32(v[4:]))
			}
			out[r.str(nameOff)] = int64(val)
		}
		return out, true, nil
	}
	return nil, false, nil
}
