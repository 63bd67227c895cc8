package bpfsyms

import (
	"encoding/binary"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Caps on what is read from a dump. Each is far beyond a real kernel; a
// value past one is reported as corruption instead of being followed.
const (
	// MaxEntries bounds every list walk: BPF programs and trampolines (a
	// few thousand on the busiest hosts), ftrace trampolines, saved init
	// functions of one module, kprobe slot pages.
	MaxEntries = 1 << 17
	// MaxRange bounds the size of one symbol: a JIT image, trampoline or
	// slot page. BPF programs are limited to 1M instructions; their images
	// stay far below this.
	MaxRange = 128 << 20
	// maxStruct bounds the size of a struct read per entry (bpf_prog_aux,
	// the largest, is about 1 KiB).
	maxStruct = 64 << 10
	// maxNameLen bounds a name array or string: KSYM_NAME_LEN is 512 since
	// v6.1, 128 before.
	maxNameLen = 4096
	// ksymNameLen is KSYM_NAME_LEN since v6.1, the cap for names read
	// through pointers when no name array says otherwise.
	ksymNameLen = 512
)

// Symbols resolves a vmlinux symbol to its address (typically the kallsyms
// index of the dump, through modsyms.FromFinder).
type Symbols func(name string) (uint64, bool)

// Options tune the loaders. Target is required; the zero value of the
// others suits a kernel with BTF.
type Options struct {
	// Target is the kernel's machine, all of it required (see
	// memory.Target): its PageSize is the size of a kprobe slot page and,
	// before v5.7, the unit of bpf_binary_header.pages.
	Target memory.Target
	// Layout is where struct offsets come from. Nil means the vmlinux BTF
	// in the dump, found through __start_BTF and __stop_BTF and read (5 MB
	// on a 6.12 kernel) by each load: a caller of more than one loader
	// passes one btflayout.FromMemory result to all of them, as a
	// kdumpsyms Session does.
	Layout btflayout.Source

	// Code, when set, finds list heads the symbol table lacks (a kernel
	// without CONFIG_KALLSYMS_ALL) through the code that uses them; see
	// Code.
	Code *Code

	// maxEntries replaces MaxEntries when set (tests and fuzzing).
	maxEntries int
}

// loader carries the state of one load.
type loader struct {
	kmem  memory.Reader
	syms  Symbols
	src   btflayout.Source
	t     memory.Target
	bo    binary.ByteOrder // t's
	ptr   uint64           // t's
	page  uint64           // t's
	next  uint64           // offsetof(struct list_head, next)
	prev  uint64           // offsetof(struct list_head, prev)
	errs  []error
	code  *Code
	heads []Head // where the heads came from, in the order found
	// nodes counts the list nodes visited by every walk of this load:
	// nested walks (ftrace's functions per module) share the MaxEntries
	// budget, so a load visits at most MaxEntries nodes in all.
	nodes    int
	maxNodes int
}

func newLoader(kmem memory.Reader, syms Symbols, opt Options) (*loader, error) {
	t := opt.Target
	if err := t.CheckPaged(); err != nil {
		return nil, fmt.Errorf("bpfsyms: %w", err)
	}
	ld := &loader{kmem: kmem, syms: syms, t: t, bo: t.ByteOrder, ptr: uint64(t.PtrSize), page: uint64(t.PageSize), maxNodes: opt.maxEntries, code: opt.Code}
	if ld.maxNodes <= 0 {
		ld.maxNodes = MaxEntries
	}
	ld.src = opt.Layout
	if ld.src == nil {
		start, ok1 := syms("__start_BTF")
		stop, ok2 := syms("__stop_BTF")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("bpfsyms: no struct layouts: %w: %w (%w)", &vmcoreinfo.MissingSymbolError{Symbols: []string{"__start_BTF", "__stop_BTF"}}, btflayout.ErrNoBTF, ErrMissingInfo)
		}
		b, err := btflayout.FromMemory(kmem, start, stop)
		if err != nil {
			return nil, fmt.Errorf("bpfsyms: no struct layouts: %w", err)
		}
		ld.src = b
	}
	ld.prev = ld.ptr
	if lh, err := ld.src.Struct("list_head", "next", "prev"); err == nil {
		f, _ := lh.Field("next")
		ld.next = f.Offset
		f, _ = lh.Field("prev")
		ld.prev = f.Offset
	}
	return ld, nil
}

// symbol returns the address of a list-head symbol.
func (ld *loader) symbol(name, why string) (uint64, error) {
	a, ok := ld.syms(name)
	if !ok {
		return 0, fmt.Errorf("bpfsyms: %w: %w", &vmcoreinfo.MissingSymbolError{Symbols: []string{name}, Why: why + ", or kallsyms without data symbols: CONFIG_KALLSYMS_ALL"}, ErrMissingInfo)
	}
	return a, nil
}

// fld is one field: offset and size in bytes.
type fld struct {
	off, size uint64
	ok        bool
}

// field looks a field up, taking pointer-sized fields as ld.ptr bytes.
func (ld *loader) field(s *btflayout.Struct, name string) fld {
	f, ok := s.Field(name)
	if !ok {
		return fld{}
	}
	size := f.Size
	if f.Kind == btflayout.KindPointer || size == 0 {
		size = ld.ptr
	}
	return fld{off: f.Offset, size: size, ok: true}
}

// structOf resolves a struct that must have every field in need, and
// returns how many bytes of it to read to see those fields.
func (ld *loader) structOf(name string, need ...string) (*btflayout.Struct, uint64, error) {
	s, err := ld.src.Struct(name, need...)
	if err != nil {
		return nil, 0, fmt.Errorf("bpfsyms: %w (%w)", err, ErrMissingInfo)
	}
	var end uint64
	for _, n := range need {
		f := ld.field(s, n)
		end = max(end, f.off+f.size)
	}
	if end > maxStruct {
		return nil, 0, missing("%s: struct %s fields end at %d bytes, beyond the %d-byte cap", ld.src.Describe(), name, end, maxStruct)
	}
	return s, end, nil
}

// uint reads an unsigned field of 1, 2, 4 or 8 bytes from b.
func (ld *loader) uint(b []byte, f fld) uint64 {
	if !f.ok || f.off+f.size > uint64(len(b)) || f.off+f.size < f.off {
		return 0
	}
	return ld.t.Uint(b[f.off : f.off+f.size])
}

func (ld *loader) pointer(addr uint64) (uint64, error) {
	return ld.t.ReadPointer(ld.kmem, addr)
}

// read reads n bytes at addr into a buffer of its own.
func (ld *loader) read(addr, n uint64) ([]byte, error) {
	b := make([]byte, n)
	if err := memory.ReadFull(ld.kmem, b, addr); err != nil {
		return nil, err
	}
	return b, nil
}

// entryErr records an entry left out.
func (ld *loader) entryErr(list string, addr uint64, err error) {
	ld.errs = append(ld.errs, &EntryError{List: list, Addr: addr, Err: err})
}

// walk follows the list_head at head through next pointers until it comes
// back to head, calling visit with each node; visit returns the node's
// next pointer. At a node that cannot be followed it records one
// *WalkError, then walks backwards from head through prev pointers to the
// break and visits the nodes found there in list order, so that one
// unreadable node loses only itself. An error reading head itself is
// returned.
//
// The walk is bounded by a visited set and by MaxEntries nodes for the
// whole load; a NULL or misaligned node is a wild pointer.
func (ld *loader) walk(list string, head uint64, visit func(node uint64) (next uint64, err error)) error {
	next, err := ld.pointer(head + ld.next)
	if err != nil {
		return fmt.Errorf("bpfsyms: list head %s at %#x: %w", list, head, err)
	}
	seen := map[uint64]struct{}{head: {}}
	// check vets a node before it is visited.
	check := func(node uint64) error {
		ld.nodes++
		switch {
		case ld.nodes > ld.maxNodes:
			return corrupt("more than %d entries", ld.maxNodes)
		case node == 0 || node%ld.ptr != 0:
			return corrupt("wild pointer %#x", node)
		}
		if _, dup := seen[node]; dup {
			return corrupt("list revisits %#x", node)
		}
		seen[node] = struct{}{}
		return nil
	}
	for next != head {
		node := next
		err := check(node)
		if err == nil {
			next, err = visit(node)
		}
		if err != nil {
			ld.errs = append(ld.errs, &WalkError{List: list, Addr: node, Err: err})
			ld.walkBack(list, head, seen, check, visit)
			return nil
		}
	}
	return nil
}

// walkBack collects the nodes from head's prev back to the first node
// already seen (the break of the forward walk), then visits them in list
// order. A node it cannot follow ends it with a second *WalkError: the
// entries between the two breaks are lost.
func (ld *loader) walkBack(list string, head uint64, seen map[uint64]struct{}, check func(uint64) error, visit func(uint64) (uint64, error)) {
	var nodes []uint64
	prev, err := ld.pointer(head + ld.prev)
	for err == nil {
		if _, done := seen[prev]; done {
			break
		}
		node := prev
		if err = check(node); err == nil {
			if prev, err = ld.pointer(node + ld.prev); err == nil {
				nodes = append(nodes, node)
			}
		}
		if err != nil {
			ld.errs = append(ld.errs, &WalkError{List: list, Addr: node, Err: fmt.Errorf("walking back from the list head: %w", err)})
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		if _, err := visit(nodes[i]); err != nil {
			ld.errs = append(ld.errs, &EntryError{List: list, Addr: nodes[i], Err: err})
		}
	}
}

// container returns the address of the struct whose member at off is at
// node, or an error when that would wrap below zero.
func container(node, off uint64) (uint64, error) {
	if node < off {
		return 0, corrupt("list node %#x below its member offset %d", node, off)
	}
	return node - off, nil
}

// cstr returns b up to its first NUL and whether there was one.
func cstr(b []byte) ([]byte, bool) {
	for i, c := range b {
		if c == 0 {
			return b[:i], true
		}
	}
	return b, false
}

// checkRange validates [start, end).
func checkRange(start, end uint64) error {
	if end < start {
		return corrupt("end %#x before start %#x", end, start)
	}
	if end-start > MaxRange {
		return corrupt("range [%#x, %#x) of %d bytes exceeds the %d-byte cap", start, end, end-start, MaxRange)
	}
	return nil
}
