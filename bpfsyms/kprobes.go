package bpfsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/btflayout"

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
// Options.Target.PageSize bytes long.
//
// Without the caches in the symbol table, Options.Code finds them through
// the code of kprobe_get_kallsym, each the struct whose sym names its
// pages ("kprobe_insn_page", "kprobe_optinsn_page"); the optimized-probe
// cache is then looked for where the kernel has CONFIG_OPTPROBES's code
// (see hasOptprobes). Without
// struct layouts for kprobe_insn_cache and kprobe_insn_page they are
// inferred there: pages follows sym, and each page's cache pointer, after
// its list and insns, points back at the cache.
//
// Errors are as for LoadBPF; a nil set means kprobe_insn_slots or the
// layouts are missing (ErrMissingInfo) or its list head cannot be read.
func LoadKprobes(kmem memory.Reader, syms Symbols, opt Options) (*Set, error) {
	ld, err := newLoader(kmem, syms, opt)
	if err != nil {
		return nil, err
	}
	kl, err := ld.kprobeLayout()
	if err != nil {
		return nil, err
	}
	b := symfinder.NewBuilder(FinderKprobes, ModuleKprobes)
	for i, c := range kprobeCaches {
		if i > 0 && !ld.hasOptprobes(c.symbol) {
			continue
		}
		addr, err := ld.locate(headSpec{sym: c.symbol, in: []string{"kprobe_get_kallsym"}, why: "a kernel without CONFIG_KPROBES",
			empty: func(a uint64) (bool, error) {
				lay, err := ld.kprobeCache(a, c.name, kl)
				if err != nil {
					return false, err
				}
				return ld.empty(a + lay.pages.off)
			}}, func(a uint64) error {
			_, err := ld.kprobeCache(a, c.name, kl)
			return err
		})
		if err != nil {
			return nil, err
		}
		lay := kl
		if kl.inferred {
			if lay, err = ld.kprobeCache(addr, c.name, kl); err != nil {
				return nil, err
			}
		}
		name := c.name
		if lay.sym.ok {
			p, err := ld.pointer(addr + lay.sym.off)
			if err == nil {
				name, err = memory.CString(ld.kmem, p, ksymNameLen)
			}
			if err != nil {
				return nil, fmt.Errorf("bpfsyms: %s.sym: %w", c.symbol, err)
			}
		}
		next := fld{off: lay.list.off + ld.next, size: ld.ptr, ok: true}
		buf := make([]byte, max(lay.pageRead, next.off+next.size))
		err = ld.walk(c.symbol+".pages", addr+lay.pages.off, func(node uint64) (uint64, error) {
			a, err := container(node, lay.list.off)
			if err != nil {
				return 0, err
			}
			if err := memory.ReadFull(ld.kmem, buf, a); err != nil {
				return 0, fmt.Errorf("struct kprobe_insn_page at %#x: %w", a, err)
			}
			if name != "" {
				b.AddSized(ld.uint(buf, lay.insns), ld.page, 't', []byte(name))
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
	return ld.set(FinderKprobes, []group{{ix: ix}})
}

// kprobeLayout is what the walk reads of struct kprobe_insn_cache and
// struct kprobe_insn_page.
type kprobeLayout struct {
	pages, sym         fld // in the cache
	list, insns, cache fld // in a page
	pageRead           uint64
	inferred           bool
}

// kprobeLayout returns the layouts from the layout source or, where it
// lacks them and the caches are found through code, marks them to be
// inferred at each cache.
func (ld *loader) kprobeLayout() (kprobeLayout, error) {
	cache, _, err := ld.structOf("kprobe_insn_cache", "pages")
	if err == nil {
		var page *btflayout.Struct
		var read uint64
		if page, read, err = ld.structOf("kprobe_insn_page", "list", "insns"); err == nil {
			return kprobeLayout{
				pages: ld.field(cache, "pages"), sym: ld.field(cache, "sym"),
				list: ld.field(page, "list"), insns: ld.field(page, "insns"), cache: ld.field(page, "cache"),
				pageRead: read,
			}, nil
		}
	}
	if _, ok := ld.syms(kprobeCaches[0].symbol); ok || ld.code == nil {
		return kprobeLayout{}, err
	}
	return kprobeLayout{inferred: true}, nil
}

// maxCacheScan bounds where sym may be in struct kprobe_insn_cache: after
// a struct mutex, which debugging options grow to some 100 bytes.
const maxCacheScan = 512

// kprobeCache validates a candidate cache at c whose sym must be name, and
// returns the layout to read it with: kl, or inferred at c (sym is the
// pointer-aligned field that points to name, after two pointers into the
// kernel text (alloc, free); pages follows it; a page is a list, insns,
// then a cache pointer back at c).
func (ld *loader) kprobeCache(c uint64, name string, kl kprobeLayout) (kprobeLayout, error) {
	isName := func(p uint64) bool {
		s, err := memory.CString(ld.kmem, p, len(name)+1)
		return err == nil && s == name
	}
	backTo := func(lay kprobeLayout) func(n uint64) error {
		return func(n uint64) error {
			if !lay.cache.ok {
				return nil
			}
			a, err := container(n, lay.list.off)
			if err != nil {
				return err
			}
			if back, err := ld.pointer(a + lay.cache.off); err != nil || back != c {
				return corrupt("struct kprobe_insn_page at %#x does not point back at the cache %#x", a, c)
			}
			return nil
		}
	}
	if !kl.inferred {
		if !kl.sym.ok {
			return kl, missing("%s: struct kprobe_insn_cache has no sym to recognise it by", ld.src.Describe())
		}
		p, err := ld.pointer(c + kl.sym.off)
		if err != nil {
			return kl, err
		}
		if !isName(p) {
			return kl, corrupt("struct kprobe_insn_cache at %#x: sym is not %q", c, name)
		}
		return kl, ld.ring(c+kl.pages.off, backTo(kl))
	}
	stext, ok1 := ld.syms("_stext")
	etext, ok2 := ld.syms("_etext")
	if !ok1 || !ok2 || etext <= stext {
		return kl, missing("no _stext/_etext to recognise the kprobe caches' functions by")
	}
	words := make([]byte, maxCacheScan)
	if err := memory.ReadFull(ld.kmem, words, c); err != nil {
		return kl, err
	}
	word := func(off uint64) uint64 { return ld.uint(words, fld{off: off, size: ld.ptr, ok: true}) }
	inText := func(p uint64) bool { return p >= stext && p < etext }
	for off := 2 * ld.ptr; off+2*ld.ptr <= maxCacheScan; off += ld.ptr {
		if !inText(word(off-2*ld.ptr)) || !inText(word(off-ld.ptr)) || !isName(word(off)) {
			continue
		}
		lay := kprobeLayout{
			sym: fld{off: off, size: ld.ptr, ok: true}, pages: fld{off: off + ld.ptr, size: 2 * ld.ptr, ok: true},
			list: fld{off: 0, size: 2 * ld.ptr, ok: true}, insns: fld{off: 2 * ld.ptr, size: ld.ptr, ok: true},
			cache: fld{off: 3 * ld.ptr, size: ld.ptr, ok: true}, pageRead: 4 * ld.ptr, inferred: true,
		}
		return lay, ld.ring(c+lay.pages.off, backTo(lay))
	}
	return kl, corrupt("no pointer to %q after two text pointers in the %d bytes at %#x", name, maxCacheScan, c)
}

// optprobesText are functions that exist exactly with CONFIG_OPTPROBES:
// each architecture's arch_optimize_kprobes (x86, arm, powerpc; global,
// called from kernel/kprobes.c, so never inlined away), and the generic
// optimizer, kprobe_optimizer up to 7.0 and kprobe_optimizer_thread from
// 7.1 (Debian 7.2.13 has no kprobe_optimizer).
var optprobesText = []string{"arch_optimize_kprobes", "kprobe_optimizer", "kprobe_optimizer_thread"}

// hasOptprobes reports whether the kernel has the optimized-probe cache:
// its symbol, or (without data symbols) the text of one of optprobesText.
func (ld *loader) hasOptprobes(sym string) bool {
	if _, ok := ld.syms(sym); ok {
		return true
	}
	if ld.code == nil || ld.code.Func == nil {
		return false
	}
	if _, ok := ld.syms(dataWitness); ok {
		return false
	}
	for _, f := range optprobesText {
		if _, _, ok := ld.code.Func(f); ok {
			return true
		}
	}
	return false
}
