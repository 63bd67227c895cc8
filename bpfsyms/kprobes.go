package bpfsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// kprobeCaches are the instruction-slot caches kprobe_get_kallsym lists,
// in its order, with the name each cache's sym points to
// (KPROBE_INSN_PAGE_SYM, KPROBE_OPTINSN_PAGE_SYM) for layouts without sym.
var kprobeCaches = []struct{ symbol, name string }{
	{"kprobe_insn_slots", "kprobe_insn_page"},
	{"kprobe_optinsn_slots", "kprobe_optinsn_page"},
}

// LoadKprobes reads the pages of kprobe instruction slots as a set named
// "kprobes": for kprobe_insn_slots and then kprobe_optinsn_slots (absent
// without CONFIG_OPTPROBES, and then skipped), one symbol per page in list
// order, named by the cache's sym, type 't', module "__builtin__kprobes",
// Options.PageSize bytes long.
//
// Errors are as for LoadBPF; a nil set means kprobe_insn_slots or the
// layouts are missing (ErrMissingInfo) or its list head cannot be read.
func LoadKprobes(kmem memory.Reader, syms Symbols, opt Options) (*Set, error) {
	ld, err := newLoader(kmem, syms, opt)
	if err != nil {
		return nil, err
	}
	first, err := ld.symbol(kprobeCaches[0].symbol, "a kernel without CONFIG_KPROBES")
	if err != nil {
		return nil, err
	}
	cache, _, err := ld.structOf("kprobe_insn_cache", "pages")
	if err != nil {
		return nil, err
	}
	page, pageRead, err := ld.structOf("kprobe_insn_page", "list", "insns")
	if err != nil {
		return nil, err
	}
	pages, sym := ld.field(cache, "pages"), ld.field(cache, "sym")
	list, insns := ld.field(page, "list"), ld.field(page, "insns")
	next := fld{off: list.off + ld.next, size: ld.ptr, ok: true}
	buf := make([]byte, max(pageRead, next.off+next.size))
	b := symfinder.NewBuilder(FinderKprobes, ModuleKprobes)
	for i, c := range kprobeCaches {
		addr := first
		if i > 0 {
			var ok bool
			if addr, ok = ld.syms(c.symbol); !ok {
				continue
			}
		}
		name := c.name
		if sym.ok {
			p, err := ld.pointer(addr + sym.off)
			if err == nil {
				name, err = memory.CString(ld.kmem, p, ksymNameLen)
			}
			if err != nil {
				return nil, fmt.Errorf("bpfsyms: %s.sym: %w", c.symbol, err)
			}
		}
		err := ld.walk(c.symbol+".pages", addr+pages.off, func(node uint64) (uint64, error) {
			a, err := container(node, list.off)
			if err != nil {
				return 0, err
			}
			if err := memory.ReadFull(ld.kmem, buf, a); err != nil {
				return 0, fmt.Errorf("struct kprobe_insn_page at %#x: %w", a, err)
			}
			if name != "" {
				b.AddSized(ld.uint(buf, insns), ld.page, 't', []byte(name))
			}
			return ld.uint(buf, next), nil
		})
		if err != nil {
			return nil, err
		}
	}
	ix, err := b.Build()
	if err != nil {
		return nil, err
	}
	s := newSet(FinderKprobes, []group{{ix: ix}}, ld.errs)
	return s, s.err
}
