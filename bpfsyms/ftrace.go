package bpfsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// Names ftrace gives its symbols (kernel/trace/ftrace.c).
const (
	ftraceTrampolineSym = "ftrace_trampoline"
	// moduleNameLen caps a module name read through a pointer
	// (MODULE_NAME_LEN is 56 on 64-bit, 60 on 32-bit).
	moduleNameLen = 64
)

// LoadFtrace reads ftrace's symbols as a set named "ftrace": first the
// saved init functions of modules (list ftrace_mod_maps; 'T', the module's
// own name; skipped without error when the kernel has no such list), then
// the trampolines of ftrace_ops_trampoline_list ("ftrace_trampoline", 't',
// module "__builtin__ftrace", size ops->trampoline_size).
//
// Errors are as for LoadBPF; a nil set means ftrace_ops_trampoline_list or
// its layouts are missing (ErrMissingInfo) or its head cannot be read.
func LoadFtrace(kmem memory.Reader, syms Symbols, opt Options) (*Set, error) {
	ld, err := newLoader(kmem, syms, opt)
	if err != nil {
		return nil, err
	}
	const tramps = "ftrace_ops_trampoline_list"
	why := "a kernel without CONFIG_DYNAMIC_FTRACE, or older than v5.9"
	mapsHead, haveMaps := ld.syms("ftrace_mod_maps")
	if haveMaps {
		ld.heads = append(ld.heads, Head{Symbol: "ftrace_mod_maps", Addr: mapsHead, How: "the symbol table"})
	}
	var not []uint64
	if _, ok := ld.syms(tramps); !ok && !haveMaps && ld.code != nil {
		// Both heads are found through code, where ftrace_mod_get_kallsym
		// refers to both: the maps first (ftrace_mod_address_lookup
		// refers to them alone), so that the trampolines are the other.
		var err error
		mapsHead, err = ld.locate(headSpec{sym: "ftrace_mod_maps", in: []string{"ftrace_mod_address_lookup", "ftrace_mod_get_kallsym"}, why: why, empty: ld.empty}, ld.modMapsHead)
		if err != nil {
			return nil, err
		}
		haveMaps, not = true, []uint64{mapsHead}
	}
	head, err := ld.locate(headSpec{sym: tramps, in: []string{"ftrace_mod_get_kallsym"}, not: not, why: why, empty: ld.empty}, ld.opsHead)
	if err != nil {
		return nil, err
	}
	var groups []group
	if haveMaps {
		if empty, err := ld.empty(mapsHead); err != nil {
			return nil, err
		} else if !empty {
			if groups, err = ld.ftraceModMaps(mapsHead); err != nil {
				return nil, err
			}
		}
	}
	b := symfinder.NewBuilder(FinderFtrace, ModuleFtrace)
	if empty, err := ld.empty(head); err != nil {
		return nil, err
	} else if !empty {
		if err := ld.trampolines(head, b); err != nil {
			return nil, err
		}
	}
	ix, err := b.Build()
	if err != nil {
		return nil, err
	}
	return ld.set(FinderFtrace, append(groups, group{ix: ix}))
}

// trampolines walks ftrace_ops_trampoline_list.
func (ld *loader) trampolines(head uint64, b *symfinder.Builder) error {
	ops, read, err := ld.structOf("ftrace_ops", "trampoline", "trampoline_size", "list")
	if err != nil {
		return err
	}
	tramp, size, list := ld.field(ops, "trampoline"), ld.field(ops, "trampoline_size"), ld.field(ops, "list")
	next := fld{off: list.off + ld.next, size: ld.ptr, ok: true}
	buf := make([]byte, max(read, next.off+next.size))
	return ld.walk("ftrace_ops_trampoline_list", head, func(node uint64) (uint64, error) {
		addr, err := container(node, list.off)
		if err != nil {
			return 0, err
		}
		if err := memory.ReadFull(ld.kmem, buf, addr); err != nil {
			return 0, fmt.Errorf("struct ftrace_ops at %#x: %w", addr, err)
		}
		t, n := ld.uint(buf, tramp), ld.uint(buf, size)
		if t == 0 { // ftrace_get_trampoline_kallsym skips these
			return ld.uint(buf, next), nil
		}
		if err := checkRange(t, t+n); err != nil || t+n < t {
			ld.entryErr("ftrace_ops_trampoline_list", addr, corrupt("trampoline %#x of %d bytes", t, n))
		} else {
			b.AddSized(t, n, 't', []byte(ftraceTrampolineSym))
		}
		return ld.uint(buf, next), nil
	})
}

// opsHead validates a candidate ftrace_ops_trampoline_list: a list whose
// ends agree and whose first and last struct ftrace_ops have a sane
// trampoline range; without the layout, only an empty list.
func (ld *loader) opsHead(c uint64) error {
	ops, read, err := ld.structOf("ftrace_ops", "trampoline", "trampoline_size", "list")
	if err != nil {
		return ld.ring(c, func(uint64) error { return err })
	}
	tramp, size, list := ld.field(ops, "trampoline"), ld.field(ops, "trampoline_size"), ld.field(ops, "list")
	return ld.ring(c, func(n uint64) error {
		a, err := container(n, list.off)
		if err != nil {
			return err
		}
		buf, err := ld.read(a, read)
		if err != nil {
			return err
		}
		t, sz := ld.uint(buf, tramp), ld.uint(buf, size)
		if t == 0 {
			return nil
		}
		if t+sz < t {
			return corrupt("struct ftrace_ops at %#x: trampoline %#x of %d bytes", a, t, sz)
		}
		return checkRange(t, t+sz)
	})
}

// modMapsHead validates a candidate ftrace_mod_maps: a list whose ends
// agree and whose first and last struct ftrace_mod_map each hold a list of
// functions whose ends agree; without the layout, only an empty list.
func (ld *loader) modMapsHead(c uint64) error {
	mm, _, err := ld.structOf("ftrace_mod_map", "list", "funcs")
	if err != nil {
		return ld.ring(c, func(uint64) error { return err })
	}
	list, funcs := ld.field(mm, "list"), ld.field(mm, "funcs")
	return ld.ring(c, func(n uint64) error {
		a, err := container(n, list.off)
		if err != nil {
			return err
		}
		return ld.ring(a+funcs.off, nil)
	})
}

// ftraceModMaps reads ftrace_mod_maps: one group per module map.
func (ld *loader) ftraceModMaps(head uint64) ([]group, error) {
	mm, mmRead, err := ld.structOf("ftrace_mod_map", "list", "mod", "funcs", "num_funcs")
	if err != nil {
		return nil, err
	}
	mf, mfRead, err := ld.structOf("ftrace_mod_func", "list", "name", "ip", "size")
	if err != nil {
		return nil, err
	}
	mod, _, err := ld.structOf("module", "name")
	if err != nil {
		return nil, err
	}
	mList, mMod, mFuncs, mNum := ld.field(mm, "list"), ld.field(mm, "mod"), ld.field(mm, "funcs"), ld.field(mm, "num_funcs")
	fList, fName, fIP, fSize := ld.field(mf, "list"), ld.field(mf, "name"), ld.field(mf, "ip"), ld.field(mf, "size")
	modName := ld.field(mod, "name")
	mNext := fld{off: mList.off + ld.next, size: ld.ptr, ok: true}
	fNext := fld{off: fList.off + ld.next, size: ld.ptr, ok: true}
	mBuf := make([]byte, max(mmRead, mNext.off+mNext.size))
	fBuf := make([]byte, max(mfRead, fNext.off+fNext.size))
	nameMax := int(min(max(modName.size, 1), moduleNameLen))
	var groups []group
	err = ld.walk("ftrace_mod_maps", head, func(node uint64) (uint64, error) {
		addr, err := container(node, mList.off)
		if err != nil {
			return 0, err
		}
		if err := memory.ReadFull(ld.kmem, mBuf, addr); err != nil {
			return 0, fmt.Errorf("struct ftrace_mod_map at %#x: %w", addr, err)
		}
		next := ld.uint(mBuf, mNext)
		num := ld.uint(mBuf, mNum)
		name, err := memory.CString(ld.kmem, ld.uint(mBuf, mMod)+modName.off, nameMax)
		if err != nil {
			ld.entryErr("ftrace_mod_maps", addr, fmt.Errorf("module name: %w", err))
			return next, nil
		}
		b := symfinder.NewBuilder("ftrace:"+name, name)
		walkErrs := len(ld.errs)
		if err := ld.walk("ftrace_mod_map.funcs", addr+mFuncs.off, func(fnode uint64) (uint64, error) {
			fa, err := container(fnode, fList.off)
			if err != nil {
				return 0, err
			}
			if err := memory.ReadFull(ld.kmem, fBuf, fa); err != nil {
				return 0, fmt.Errorf("struct ftrace_mod_func at %#x: %w", fa, err)
			}
			ip, size := ld.uint(fBuf, fIP), ld.uint(fBuf, fSize)
			fn, err := memory.CString(ld.kmem, ld.uint(fBuf, fName), ksymNameLen)
			switch {
			case err != nil:
				ld.entryErr("ftrace_mod_map.funcs", fa, fmt.Errorf("name: %w", err))
			case checkRange(ip, ip+size) != nil || ip+size < ip:
				ld.entryErr("ftrace_mod_map.funcs", fa, corrupt("%s at %#x of %d bytes", fn, ip, size))
			default:
				// Kept even when empty: the kernel counts it in
				// num_funcs; an empty name prints nothing.
				b.AddSized(ip, size, 'T', []byte(fn))
			}
			return ld.uint(fBuf, fNext), nil
		}); err != nil {
			return 0, err
		}
		if len(ld.errs) == walkErrs && uint64(b.Len()) != num {
			ld.entryErr("ftrace_mod_maps", addr, corrupt("module %s: num_funcs %d but %d functions listed", name, num, b.Len()))
		}
		ix, err := b.Build()
		if err != nil {
			return 0, err
		}
		groups = append(groups, group{ix: ix, modMap: true})
		return next, nil
	})
	return groups, err
}
