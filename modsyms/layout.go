package modsyms

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
)

// fld is one field as the walk reads it: an offset and a size in bytes.
type fld struct {
	off, size uint64
	ok        bool
}

func field(s *btflayout.Struct, name string, defSize uint64) fld {
	if s == nil {
		return fld{}
	}
	f, ok := s.Field(name)
	if !ok {
		return fld{}
	}
	size := f.Size
	if size == 0 || f.Kind == btflayout.KindPointer {
		size = defSize
	}
	return fld{off: f.Offset, size: size, ok: true}
}

// memKind says how a kernel records a module's memory.
type memKind uint8

const (
	memNone   memKind = iota
	memArray          // v6.4+: struct module_memory mem[MOD_MEM_NUM_TYPES]
	memLayout         // v4.5–v6.3: struct module_layout core_layout, init_layout
	memFields         // < v4.5: module_core, core_size, module_init, init_size
)

// layout holds every offset the walk uses, resolved once from a Source.
type layout struct {
	src      string
	inferred bool // from btflayout.Infer: no refcnt, taints, source_list
	ptr      uint64
	read     uint64 // bytes of struct module read per module

	state, list, name  fld
	listNext, listPrev fld

	// Symbols: through the kallsyms pointer (v4.5+) or, when direct, from
	// symtab/num_symtab/strtab in struct module itself.
	kallsyms                   fld
	direct                     bool
	mkRead                     uint64 // bytes of struct mod_kallsyms read
	symtab, numSymtab, strtab  fld
	typetab                    fld
	syms, numSyms              fld
	ksym                       *btflayout.Struct // struct kernel_symbol when the source has it
	refcnt                     fld
	taints                     fld
	sourceList                 fld // struct module.source_list (CONFIG_MODULE_UNLOAD)
	useSourceList, useSource   fld // struct module_use
	mem                        memKind
	memArr                     fld
	memCount, memStride        uint64
	memBase, memSize           fld
	memNames                   []string // by mod_mem_type index
	coreLayout, initLayout     fld
	mlBase, mlSize, mlTextSize fld
	oldCore, oldCoreSize       fld
	oldCoreText                fld
	oldInit, oldInitSize       fld
	oldInitText                fld
}

// Default names of enum mod_mem_type (v6.4+), used when the source has no
// enum (a table); BTF's enum overrides them.
var defaultMemNames = []string{"MOD_TEXT", "MOD_DATA", "MOD_RODATA", "MOD_RO_AFTER_INIT", "MOD_INIT_TEXT", "MOD_INIT_DATA", "MOD_INIT_RODATA"}

// maxMemTypes bounds MOD_MEM_NUM_TYPES as read from a layout (7 in v6.4).
const maxMemTypes = 32

func resolveLayout(src btflayout.Source, ptr uint64) (*layout, error) {
	missing := func(err error) error {
		return fmt.Errorf("modsyms: %w (%w)", err, ErrMissingInfo)
	}
	mod, err := src.Struct("module", "list", "name", "state")
	if err != nil {
		return nil, missing(err)
	}
	l := &layout{src: src.Describe(), ptr: ptr}
	_, l.inferred = src.(*btflayout.Inferred)
	l.state = field(mod, "state", 4)
	l.list = field(mod, "list", 2*ptr)
	l.name = field(mod, "name", 0)
	if l.name.size == 0 {
		l.name.size = 64 - ptr // MODULE_NAME_LEN
	}
	l.listNext, l.listPrev = fld{0, ptr, true}, fld{ptr, ptr, true}
	if lh, err := src.Struct("list_head", "next", "prev"); err == nil {
		l.listNext, l.listPrev = field(lh, "next", ptr), field(lh, "prev", ptr)
	}

	// Symbol table.
	if mod.Has("kallsyms") {
		mk, err := src.Struct("mod_kallsyms", "symtab", "num_symtab", "strtab")
		if err != nil {
			return nil, missing(err)
		}
		l.kallsyms = field(mod, "kallsyms", ptr)
		l.symtab, l.numSymtab, l.strtab = field(mk, "symtab", ptr), field(mk, "num_symtab", 4), field(mk, "strtab", ptr)
		l.typetab = field(mk, "typetab", ptr)
		l.mkRead = mk.End()
	} else if mod.Has("symtab", "num_symtab", "strtab") {
		l.direct = true
		l.symtab, l.numSymtab, l.strtab = field(mod, "symtab", ptr), field(mod, "num_symtab", 4), field(mod, "strtab", ptr)
	} else {
		return nil, missing(fmt.Errorf("%s: struct module has neither kallsyms nor symtab: %w", src.Describe(), btflayout.ErrNotFound))
	}
	l.syms, l.numSyms = field(mod, "syms", ptr), field(mod, "num_syms", 4)
	if ks, err := src.Struct("kernel_symbol"); err == nil {
		l.ksym = ks
	}
	l.refcnt = field(mod, "refcnt", 4)
	if l.refcnt.size > 8 {
		l.refcnt.size = 4 // atomic_t as a struct: its int counter is first
	}
	l.taints = field(mod, "taints", ptr)
	if mu, err := src.Struct("module_use", "source_list", "source"); err == nil && mod.Has("source_list") {
		l.sourceList = field(mod, "source_list", 2*ptr)
		l.useSourceList, l.useSource = field(mu, "source_list", 2*ptr), field(mu, "source", ptr)
	}

	// Memory regions.
	switch {
	case mod.Has("mem"):
		mm, err := src.Struct("module_memory", "base", "size")
		if err != nil {
			return nil, missing(err)
		}
		f, _ := mod.Field("mem")
		l.mem = memArray
		l.memArr = fld{off: f.Offset, size: f.Size, ok: true}
		l.memStride = mm.Size
		if l.memStride == 0 {
			l.memStride = f.ElemSize
		}
		l.memCount = f.Count
		if l.memCount == 0 && l.memStride > 0 {
			l.memCount = f.Size / l.memStride
		}
		if l.memCount == 0 {
			l.memCount = uint64(len(defaultMemNames))
		}
		if l.memStride == 0 || l.memCount > maxMemTypes {
			return nil, missing(fmt.Errorf("%s: module.mem of %d × %d bytes: %w", src.Describe(), l.memCount, l.memStride, ErrCorrupt))
		}
		l.memBase, l.memSize = field(mm, "base", ptr), field(mm, "size", 4)
		l.memNames = make([]string, l.memCount)
		copy(l.memNames, defaultMemNames)
		if e, err := src.Enum("mod_mem_type"); err == nil {
			for name, v := range e {
				if v >= 0 && uint64(v) < l.memCount {
					l.memNames[v] = name
				}
			}
		}
		for i, n := range l.memNames {
			if n == "" {
				l.memNames[i] = fmt.Sprintf("MOD_MEM_%d", i)
			}
		}
	case mod.Has("core_layout"):
		ml, err := src.Struct("module_layout", "base", "size")
		if err != nil {
			return nil, missing(err)
		}
		l.mem = memLayout
		l.coreLayout, l.initLayout = field(mod, "core_layout", 0), field(mod, "init_layout", 0)
		l.mlBase, l.mlSize, l.mlTextSize = field(ml, "base", ptr), field(ml, "size", 4), field(ml, "text_size", 4)
	case mod.Has("module_core", "core_size"):
		l.mem = memFields
		l.oldCore, l.oldCoreSize, l.oldCoreText = field(mod, "module_core", ptr), field(mod, "core_size", 4), field(mod, "core_text_size", 4)
		l.oldInit, l.oldInitSize, l.oldInitText = field(mod, "module_init", ptr), field(mod, "init_size", 4), field(mod, "init_text_size", 4)
	}

	l.read = mod.Size
	if l.read == 0 {
		l.read = mod.End()
	}
	if l.read > maxModuleStruct {
		return nil, missing(fmt.Errorf("%s: sizeof(struct module) = %d: %w", src.Describe(), l.read, ErrCorrupt))
	}
	for _, f := range []fld{l.state, l.list, l.name, l.kallsyms, l.syms, l.numSyms, l.refcnt, l.taints, l.sourceList} {
		if f.ok && f.off+f.size > l.read {
			return nil, missing(fmt.Errorf("%s: a struct module field lies beyond sizeof(struct module) = %d: %w", src.Describe(), l.read, ErrCorrupt))
		}
	}
	if l.memArr.ok && l.memArr.off+l.memCount*l.memStride > l.read {
		return nil, missing(errors.New("module.mem lies beyond sizeof(struct module)"))
	}
	return l, nil
}

// maxModuleStruct bounds sizeof(struct module): about 1 KiB on v6.x, larger
// with debug options; 64 KiB is far beyond any build.
const maxModuleStruct = 64 << 10
