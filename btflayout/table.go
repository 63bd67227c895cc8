package btflayout

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Table is a Source written out by hand or by WriteTable: offsets only, no
// types. It is safe for concurrent use once parsed.
//
// # Format
//
// UTF-8 text, one entry per line; blank lines and lines starting with '#'
// are ignored; numbers are decimal or 0x-prefixed hex:
//
//	sizeof(module) = 1280          # sizeof(struct module)
//	module.state = 0               # offset of a field
//	module.name = 24:56            # offset:size in bytes
//	module.mem = 320:112:7         # offset:size:count for an array
//	enum(mod_mem_type).MOD_TEXT = 0
//
// Fields of anonymous members are written under their own names, as C
// names them. A struct exists once any line names it.
type Table struct {
	desc    string
	structs map[string]*Struct
	enums   map[string]map[string]int64
}

// maxTableLines bounds a table; a real one has a few dozen lines.
const maxTableLines = 1 << 16

// ParseTable reads a layout table. desc names it in messages. A malformed
// line is a *LineError wrapping ErrCorrupt.
func ParseTable(r io.Reader, desc string) (*Table, error) {
	t := &Table{desc: desc, structs: map[string]*Struct{}, enums: map[string]map[string]int64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 4096)
	line := 0
	for sc.Scan() {
		line++
		if line > maxTableLines {
			return nil, fmt.Errorf("btflayout: %s: more than %d lines: %w", desc, maxTableLines, ErrCorrupt)
		}
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if err := t.parseLine(text); err != nil {
			return nil, &LineError{File: desc, Num: line, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("btflayout: %s: %w: %w", desc, ErrCorrupt, err)
	}
	return t, nil
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrCorrupt)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (t *Table) strct(name string) *Struct {
	s := t.structs[name]
	if s == nil {
		s = &Struct{Name: name}
		t.structs[name] = s
	}
	return s
}

func (t *Table) parseLine(text string) error {
	key, val, ok := strings.Cut(text, "=")
	if !ok {
		return bad("%q: want KEY = VALUE", text)
	}
	key, val = strings.TrimSpace(key), strings.TrimSpace(val)
	switch {
	case strings.HasPrefix(key, "sizeof(") && strings.HasSuffix(key, ")"):
		name := key[len("sizeof(") : len(key)-1]
		if !isIdent(name) {
			return bad("struct name %q", name)
		}
		n, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return bad("size %q", val)
		}
		t.strct(name).Size = n
	case strings.HasPrefix(key, "enum("):
		name, konst, ok := strings.Cut(key[len("enum("):], ").")
		if !ok || !isIdent(name) || !isIdent(konst) {
			return bad("%q: want enum(TYPE).CONSTANT", key)
		}
		v, err := strconv.ParseInt(val, 0, 64)
		if err != nil {
			return bad("enum value %q", val)
		}
		if t.enums[name] == nil {
			t.enums[name] = map[string]int64{}
		}
		t.enums[name][konst] = v
	default:
		sname, fname, ok := strings.Cut(key, ".")
		if !ok || !isIdent(sname) || !isIdent(fname) {
			return bad("%q: want STRUCT.FIELD", key)
		}
		parts := strings.Split(val, ":")
		if len(parts) > 3 {
			return bad("%q: want OFFSET[:SIZE[:COUNT]]", val)
		}
		var nums [3]uint64
		for i, p := range parts {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 0, 64)
			if err != nil || n > 1<<32 {
				return bad("%q: want OFFSET[:SIZE[:COUNT]]", val)
			}
			nums[i] = n
		}
		s := t.strct(sname)
		if _, dup := s.Field(fname); dup {
			return bad("%s.%s given twice", sname, fname)
		}
		f := Field{Name: fname, Offset: nums[0], Size: nums[1], Count: nums[2]}
		if f.Count > 0 {
			f.Kind = KindArray
			f.ElemSize = f.Size / f.Count
		}
		s.fields = append(s.fields, f)
	}
	return nil
}

// Describe implements Source.
func (t *Table) Describe() string { return "layout table " + t.desc }

// Struct implements Source.
func (t *Table) Struct(name string, need ...string) (*Struct, error) {
	if s := t.structs[name]; s != nil && s.Has(need...) {
		return s, nil
	}
	return nil, notFound(t, needDesc(name, need))
}

// Enum implements Source.
func (t *Table) Enum(name string) (map[string]int64, error) {
	if e := t.enums[name]; e != nil {
		return e, nil
	}
	return nil, notFound(t, "enum "+name)
}

// Want names what WriteTable should copy: struct name → field names, and
// enum type names.
type Want struct {
	Structs map[string][]string
	Enums   []string
}

// WriteTable writes, in ParseTable's format, the sizes, fields and enum
// constants of src that w names; structs, fields and enums src lacks are
// left out (a kernel without them). It is how a table is made once from a
// vmlinux with debug info and reused for dumps of the same build.
func WriteTable(out io.Writer, src Source, w Want) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# struct layouts from %s\n", src.Describe())
	names := make([]string, 0, len(w.Structs))
	for n := range w.Structs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s, err := src.Struct(n)
		if err != nil {
			continue
		}
		if s.Size > 0 {
			fmt.Fprintf(&buf, "sizeof(%s) = %d\n", n, s.Size)
		}
		for _, fn := range w.Structs[n] {
			f, ok := s.Field(fn)
			if !ok {
				continue
			}
			fmt.Fprintf(&buf, "%s.%s = %d:%d", n, fn, f.Offset, f.Size)
			if f.Kind == KindArray {
				fmt.Fprintf(&buf, ":%d", f.Count)
			}
			buf.WriteByte('\n')
		}
	}
	for _, n := range w.Enums {
		e, err := src.Enum(n)
		if err != nil {
			continue
		}
		ks := make([]string, 0, len(e))
		for k := range e {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, func(a, b string) int {
			if e[a] != e[b] {
				if e[a] < e[b] {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, k := range ks {
			fmt.Fprintf(&buf, "enum(%s).%s = %d\n", n, k, e[k])
		}
	}
	_, err := out.Write(buf.Bytes())
	return err
}
