package modsyms

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Caps on counts read from a dump. Each is far beyond any real kernel;
// a value past one is corruption, reported instead of allocated.
const (
	// MaxModules bounds the module list walk (a few hundred on large
	// servers; the kernel has no hard limit).
	MaxModules = 1 << 14
	// MaxSymbols bounds num_symtab of one module (amdgpu, among the largest,
	// keeps about 20k core symbols with KALLSYMS_ALL).
	MaxSymbols = 1 << 20
	// MaxStrtab bounds the bytes of one module's string table read.
	MaxStrtab = 32 << 20
	// MaxExports bounds num_syms (a module's EXPORT_SYMBOLs).
	MaxExports = 1 << 18
	// readChunk is the largest single read; bigger tables are read in
	// chunks of this size, so a lying count costs at most one chunk beyond
	// what memory really holds.
	readChunk = 4 << 20
	// probeOver is the table size above which readTable checks that the
	// table's last byte is readable before allocating.
	probeOver = 64 << 10
)

// KsymNameLen is KSYM_NAME_LEN since v6.1 (128 before): /proc/kallsyms
// truncates names to KsymNameLen-1 bytes.
const KsymNameLen = 512

// State is enum module_state.
type State uint32

// Module states (include/linux/module.h).
const (
	StateLive     State = 0
	StateComing   State = 1
	StateGoing    State = 2
	StateUnformed State = 3
)

func (s State) String() string {
	switch s {
	case StateLive:
		return "Live"
	case StateComing:
		return "Loading"
	case StateGoing:
		return "Unloading"
	case StateUnformed:
		return "Unformed"
	}
	return fmt.Sprintf("State(%d)", uint32(s))
}

// Region is one block of a module's memory.
type Region struct {
	// Name is the mod_mem_type constant on v6.4+ ("MOD_TEXT", "MOD_DATA",
	// ...), "core" or "init" for the module_layout / module_core kernels.
	Name string
	Base uint64
	Size uint64
	// TextSize is how many bytes at Base are code: Size for MOD_TEXT and
	// MOD_INIT_TEXT, 0 for other mem[] regions, text_size for layouts.
	TextSize uint64
	// Init reports an init region (freed once the module's init returns).
	Init bool
}

// Module is one module of the list, as /proc/modules describes it plus
// what modsyms read from it.
type Module struct {
	Name  string
	Addr  uint64 // address of the struct module
	State State
	// Regions lists the module's memory in the kernel's own order.
	Regions []Region
	// Size is /proc/modules' size column: the sum of every region's size
	// (init regions are 0 once init has run).
	Size uint64
	// CoreSize is the sum of the non-init regions.
	CoreSize uint64
	// TextBase is /proc/modules' address column: mem[MOD_TEXT].base on
	// v6.4+, core_layout.base before, module_core before v4.5.
	TextBase uint64
	// RefCount is /proc/modules' refcount column; HasRefCount is false
	// when the kernel has no refcnt (CONFIG_MODULE_UNLOAD off) or it could
	// not be read.
	RefCount    int64
	HasRefCount bool
	// Taints is struct module's taints bitmask (TAINT_* bit numbers, as
	// the kernel's add_taint_module sets them); see Flags.
	Taints uint64
	// Inferred is set when the layouts were inferred (btflayout.Infer),
	// which finds some fields only when the dump shows them: RefCount is
	// then unknown when HasRefCount is false, Deps when nil, and Taints
	// when HasTaints is false (none of them zero or empty).
	Inferred bool
	// HasTaints is true when Taints was read.
	HasTaints bool
	// Deps lists the modules using this one (/proc/modules' fourth column,
	// without "[permanent]"); nil when unknown. Where DepsErr is set, the
	// list could not be read to its end: Deps holds the users read before
	// the break, and there may be more.
	Deps []string
	// DepsErr says why the users list could not be read to its end (a
	// *ModuleError wrapping a *memory.FaultError for a page not in the
	// dump, or ErrCorrupt); nil when Deps is complete or unknown. It is
	// not part of Err: the symbols do not depend on it.
	DepsErr error
	// NumSymtab is num_symtab of the symbol table read (including index 0
	// and unnamed symbols that /proc/kallsyms skips).
	NumSymtab uint64
	// Symbols is the module's symbol index, named "module:NAME"; nil when
	// Err says why it could not be read.
	Symbols *symfinder.Index
	// Err is non-nil when the module's symbols could not be read (Symbols
	// is nil) or were read only in part (Symbols is set: for example the
	// export table was missing, so every type letter is lower case). It is
	// a *ModuleError.
	Err error
}

// Options tune Load. Target is required; the zero value of the others
// suits a kernel with BTF.
type Options struct {
	// Target is the kernel's machine: its ByteOrder and PtrSize are
	// required (see memory.Target).
	Target memory.Target
	// Layout is where struct offsets come from. Nil means the vmlinux BTF
	// in the dump, found through __start_BTF and __stop_BTF; supply a
	// btflayout.Open'ed vmlinux or BTF file, or a btflayout.ParseTable'd
	// table, for kernels without CONFIG_DEBUG_INFO_BTF.
	Layout btflayout.Source
	// KsymNameLen is the kernel's KSYM_NAME_LEN (512 since v6.1, 128
	// before): names longer than KsymNameLen-1 are truncated as
	// /proc/kallsyms truncates them. 0 means 512.
	KsymNameLen int
	// Head is the address of the modules list head; 0 means the modules
	// symbol's.
	Head uint64
	// TypeInSize says, for kernels without typetab (before v5.2), that the
	// type letter was kept in st_size (v5.0 and v5.1) rather than in
	// st_info (before v5.0). Sizes are then unknown.
	TypeInSize bool
}

// Symbols resolves a vmlinux symbol to its address.
type Symbols func(name string) (uint64, bool)

// FromFinder returns a Symbols that asks f by name (typically the kallsyms
// index of vmlinux).
func FromFinder(f symfinder.Finder) Symbols {
	return func(name string) (uint64, bool) {
		var addr uint64
		var ok bool
		_ = f.Find(symfinder.Query{Kind: symfinder.ByName, Name: name}, func(s symfinder.Symbol) bool {
			addr, ok = s.Addr, true
			return false
		})
		return addr, ok
	}
}

// loader carries the state of one Load.
type loader struct {
	kmem    memory.Reader
	t       memory.Target
	bo      binary.ByteOrder // t's
	ptr     uint64           // t's
	nameLen int
	opt     Options
	l       *layout
	ksym    *ksymLayout   // validated struct kernel_symbol layout, once known
	pending []pendingSyms // modules walked, symbols not yet read

	// Scratch buffers reused from module to module: what is kept is
	// copied out of them (names into the index, export names into
	// strings) before the next module is read.
	modBuf, mkBuf           []byte // struct module, struct mod_kallsyms
	tabBuf, typeBuf, strBuf []byte // symtab, typetab, strtab
	exRawBuf, exNameBuf     []byte // mod->syms, the export names' span
}

// Load walks the modules list of a dump and reads every module's symbols.
//
// It returns the set of modules and a nil error when every module loaded.
// Modules fail one by one: a module whose pages were filtered out of the
// dump is listed with Symbols nil and Err set, and Load returns the set
// together with an error joining every *ModuleError (and a *WalkError when
// the list itself broke). Load returns a nil set only when nothing could be
// walked: no layouts (ErrMissingInfo, btflayout.ErrNoBTF), no modules
// symbol (ErrMissingInfo), the list head unreadable, or an incomplete
// opt.Target (memory.ErrUnknownTarget).
func Load(kmem memory.Reader, syms Symbols, opt Options) (*Set, error) {
	if err := opt.Target.Check(); err != nil {
		return nil, fmt.Errorf("modsyms: %w", err)
	}
	t := opt.Target
	ld := &loader{kmem: kmem, opt: opt, t: t, bo: t.ByteOrder, ptr: uint64(t.PtrSize), nameLen: opt.KsymNameLen}
	if ld.nameLen <= 0 {
		ld.nameLen = KsymNameLen
	}
	src := opt.Layout
	if src == nil {
		start, ok1 := syms("__start_BTF")
		stop, ok2 := syms("__stop_BTF")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("modsyms: no struct layouts: %w: %w", &vmcoreinfo.MissingSymbolError{Symbols: []string{"__start_BTF", "__stop_BTF"}}, btflayout.ErrNoBTF)
		}
		b, err := btflayout.FromMemory(kmem, start, stop)
		if err != nil {
			return nil, fmt.Errorf("modsyms: no struct layouts: %w", err)
		}
		src = b
	}
	l, err := resolveLayout(src, ld.ptr)
	if err != nil {
		return nil, err
	}
	ld.l = l
	head := opt.Head
	if head == 0 {
		var ok bool
		if head, ok = syms("modules"); !ok {
			return nil, fmt.Errorf("modsyms: %w: %w", &vmcoreinfo.MissingSymbolError{Symbols: []string{"modules"}, Why: "kallsyms without KALLSYMS_ALL?"}, ErrMissingInfo)
		}
	}
	return ld.load(head)
}

// Layout-independent helpers.

func (ld *loader) uint(b []byte, f fld) (uint64, bool) {
	if !f.ok || f.off+f.size > uint64(len(b)) || f.off+f.size < f.off {
		return 0, false
	}
	switch f.size {
	case 1, 2, 4, 8:
		return ld.t.Uint(b[f.off : f.off+f.size]), true
	}
	return 0, false
}

func (ld *loader) pointer(addr uint64) (uint64, error) {
	return ld.t.ReadPointer(ld.kmem, addr)
}

// readTable reads n bytes at addr into dst's storage, which it grows as
// needed, and returns them: in one read when n ≤ readChunk, otherwise in
// readChunk pieces, so memory grows only with what exists. The result
// aliases dst; callers pass a scratch buffer they reuse from table to
// table (every name is copied out before the next read). When a table of
// one chunk needs a new buffer, it gets spare bytes of capacity beyond n.
func (ld *loader) readTable(dst []byte, addr, n, spare uint64) ([]byte, error) {
	if addr+n < addr {
		return dst[:0], corrupt("table at %#x of %d bytes wraps the address space", addr, n)
	}
	if n > probeOver && n > uint64(cap(dst)) {
		// Before allocating for a large table, check that its first and
		// last bytes exist: a lying count then costs nothing.
		var one [1]byte
		if err := memory.ReadFull(ld.kmem, one[:], addr); err != nil {
			return dst[:0], err
		}
		if err := memory.ReadFull(ld.kmem, one[:], addr+n-1); err != nil {
			return dst[:0], err
		}
	}
	if n <= readChunk {
		if uint64(cap(dst)) < n+spare {
			dst = make([]byte, n, n+spare)
		}
		dst = dst[:n]
		if err := memory.ReadFull(ld.kmem, dst, addr); err != nil {
			return dst[:0], err
		}
		return dst, nil
	}
	dst = dst[:0]
	for off := uint64(0); off < n; off += readChunk {
		k := min(n-off, readChunk)
		dst = slices.Grow(dst, int(k))[:off+k]
		if err := memory.ReadFull(ld.kmem, dst[off:], addr+off); err != nil {
			return dst[:0], err
		}
	}
	return dst, nil
}

// readPrefix reads up to n bytes at addr into dst's storage, as readTable
// does, and returns what could be read before the first fault (at least
// least bytes, or an error).
func (ld *loader) readPrefix(dst []byte, addr, n, least uint64) ([]byte, error) {
	buf, err := ld.readTable(dst, addr, least, n-min(n, least))
	if err != nil || n <= least {
		return buf, err
	}
	buf = slices.Grow(buf, int(n-least)) // no copy unless least > readChunk
	ext := buf[least:n]
	k, _ := ld.kmem.ReadAt(ext, addr+least)
	k = max(0, min(k, len(ext)))
	return buf[:least+uint64(k)], nil
}

func cstr(b []byte) ([]byte, bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i], true
	}
	return b, false
}

func toUpper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c - 'A' + 'a'
	}
	return c
}

func printable(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return len(s) > 0
}

func quoteName(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// taintLetters are the kernel's taint flags by bit number (taint_flags[]
// in kernel/panic.c: TAINT_PROPRIETARY_MODULE 'P' is bit 0, ...,
// TAINT_UNSIGNED_MODULE 'E' bit 13, TAINT_FWCTL 'J' bit 19). Only the
// module flags (P F C O E K X T N J) are ever set in a module's mask;
// module_flags_taint prints the set ones in bit order.
const taintLetters = "PFSRMBUDAWCIOELKXTNJ"

// Flags returns what /proc/modules prints after the address (module_flags
// in kernel/module/main.c): "(" taint letters, then "-" for a module being
// unloaded or "+" for one being loaded, ")"; "" when there is none of these.
func (m *Module) Flags() string {
	if m.Taints == 0 && m.State != StateGoing && m.State != StateComing {
		return ""
	}
	b := []byte{'('}
	for bit := range len(taintLetters) {
		if m.Taints&(1<<bit) != 0 {
			b = append(b, taintLetters[bit])
		}
	}
	switch m.State {
	case StateGoing:
		b = append(b, '-')
	case StateComing:
		b = append(b, '+')
	}
	return string(append(b, ')'))
}
