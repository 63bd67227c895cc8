package modsyms

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// load walks the list at head: forwards through list.next until it
// returns to head; if a node cannot be followed, backwards from head
// through list.prev to recover the modules beyond the break.
func (ld *loader) load(head uint64) (*Set, error) {
	l := ld.l
	first, err := ld.pointer(head + l.listNext.off)
	if err != nil {
		return nil, fmt.Errorf("modsyms: modules list head at %#x: %w", head, err)
	}
	var errs []error
	seen := map[uint64]bool{head: true}
	var fwd []*Module
	var walkErr error
	for node := first; node != head; {
		m, next, err := ld.node(node, seen, len(fwd))
		if err != nil {
			walkErr = err
			break
		}
		if m != nil {
			fwd = append(fwd, m)
		}
		node = next
	}
	var back []*Module
	if walkErr != nil {
		errs = append(errs, walkErr)
		// Recover what lies beyond the break from the other end.
		node, err := ld.pointer(head + l.listPrev.off)
		for err == nil && node != head && !seen[node] {
			var m *Module
			at := node
			m, node, err = ld.nodeBack(node, seen, len(fwd)+len(back))
			if m != nil {
				back = append(back, m)
			}
			if err != nil {
				// A second break: the modules between the two are lost.
				errs = append(errs, &WalkError{Addr: at, Err: fmt.Errorf("walking back from the list head: %w", err)})
			}
		}
	}
	slices.Reverse(back)
	mods := append(fwd, back...)
	ld.readSymbols()
	for _, m := range mods {
		if m.Err != nil {
			errs = append(errs, m.Err)
		}
	}
	set := newSet(mods)
	set.err = errors.Join(errs...)
	return set, set.err
}

// node reads the module whose list member is at node and returns it
// (nil for an unformed module) with the next node.
func (ld *loader) node(node uint64, seen map[uint64]bool, count int) (*Module, uint64, error) {
	if seen[node] {
		return nil, 0, &WalkError{Addr: node, Err: corrupt("list revisits %#x", node)}
	}
	if count >= MaxModules {
		return nil, 0, &WalkError{Addr: node, Err: corrupt("more than %d modules", MaxModules)}
	}
	seen[node] = true
	mod := node - ld.l.list.off
	buf := ld.structBuf()
	if err := memory.ReadFull(ld.kmem, buf, mod); err != nil {
		return nil, 0, &WalkError{Addr: node, Err: fmt.Errorf("struct module at %#x: %w", mod, err)}
	}
	next, _ := ld.uint(buf, fld{off: ld.l.list.off + ld.l.listNext.off, size: ld.ptr, ok: true})
	m := ld.module(mod, buf)
	return m, next, nil
}

// nodeBack is node for the backward walk: it returns the previous node.
func (ld *loader) nodeBack(node uint64, seen map[uint64]bool, count int) (*Module, uint64, error) {
	if count >= MaxModules {
		return nil, 0, corrupt("more than %d modules", MaxModules)
	}
	seen[node] = true
	mod := node - ld.l.list.off
	buf := ld.structBuf()
	if err := memory.ReadFull(ld.kmem, buf, mod); err != nil {
		return nil, 0, err
	}
	prev, _ := ld.uint(buf, fld{off: ld.l.list.off + ld.l.listPrev.off, size: ld.ptr, ok: true})
	return ld.module(mod, buf), prev, nil
}

// structBuf returns the scratch buffer a struct module is read into;
// module copies out what it keeps.
func (ld *loader) structBuf() []byte {
	ld.modBuf = slices.Grow(ld.modBuf[:0], int(ld.l.read))[:ld.l.read]
	return ld.modBuf
}

// module decodes one struct module read into buf; nil for an unformed one.
func (ld *loader) module(addr uint64, buf []byte) *Module {
	l := ld.l
	m := &Module{Addr: addr, Inferred: l.inferred}
	st, _ := ld.uint(buf, l.state)
	m.State = State(st)
	if m.State == StateUnformed {
		return nil
	}
	nameBytes := buf[l.name.off : l.name.off+l.name.size]
	name, ok := cstr(nameBytes)
	m.Name = string(name)
	fail := func(err error) *Module {
		m.Err = &ModuleError{Name: quoteName(m.Name), Addr: addr, Err: err}
		return m
	}
	if !ok {
		return fail(corrupt("name without NUL in %d bytes", l.name.size))
	}
	if !printable(name) {
		return fail(corrupt("name %q is not printable", name))
	}
	if m.State > StateUnformed {
		return fail(corrupt("state %d", st))
	}
	ld.regions(m, buf)
	if l.refcnt.ok {
		if v, ok := ld.uint(buf, l.refcnt); ok {
			// atomic_t counts MODULE_REF_BASE (1) for the module itself.
			m.RefCount, m.HasRefCount = int64(int32(uint32(v)))-1, true
		}
	}
	if l.taints.ok {
		if v, ok := ld.uint(buf, l.taints); ok {
			m.Taints, m.HasTaints = v, true
		}
	}
	if l.sourceList.ok {
		m.Deps, m.DepsErr = ld.deps(m)
	}
	src, err := ld.symSource(m, buf)
	if err != nil {
		return fail(err)
	}
	ld.pending = append(ld.pending, pendingSyms{m: m, src: src})
	return m
}

// pendingSyms is a walked module whose symbols are still to be read.
type pendingSyms struct {
	m   *Module
	src symSource
}

// readSymbols reads the symbols of every module the walk found. It goes
// from the largest symbol table down, so the scratch buffers grow for the
// first module only instead of at every larger module of the list; each
// module's result is independent of the order.
func (ld *loader) readSymbols() {
	slices.SortStableFunc(ld.pending, func(a, b pendingSyms) int { return cmp.Compare(b.src.num, a.src.num) })
	for i := range ld.pending {
		p := &ld.pending[i]
		if err := ld.symbols(p.m, &p.src); err != nil {
			p.m.Err = &ModuleError{Name: quoteName(p.m.Name), Addr: p.m.Addr, Err: err}
		}
	}
	ld.pending = nil
}

func (ld *loader) regions(m *Module, buf []byte) {
	l := ld.l
	add := func(r Region) {
		m.Regions = append(m.Regions, r)
		m.Size += r.Size
		if !r.Init {
			m.CoreSize += r.Size
		}
	}
	switch l.mem {
	case memArray:
		m.Regions = make([]Region, 0, l.memCount)
		for i := uint64(0); i < l.memCount; i++ {
			off := l.memArr.off + i*l.memStride
			base, _ := ld.uint(buf, fld{off: off + l.memBase.off, size: ld.ptr, ok: true})
			size, _ := ld.uint(buf, fld{off: off + l.memSize.off, size: l.memSize.size, ok: true})
			name := l.memNames[i]
			r := Region{Name: name, Base: base, Size: size, Init: len(name) > 8 && name[:8] == "MOD_INIT"}
			if name == "MOD_TEXT" || name == "MOD_INIT_TEXT" {
				r.TextSize = size
			}
			if name == "MOD_TEXT" {
				m.TextBase = base
			}
			add(r)
		}
	case memLayout:
		m.Regions = make([]Region, 0, 2)
		for _, lay := range []struct {
			f    fld
			name string
		}{{l.coreLayout, "core"}, {l.initLayout, "init"}} {
			if !lay.f.ok {
				continue
			}
			at := func(f fld) uint64 {
				v, _ := ld.uint(buf, fld{off: lay.f.off + f.off, size: f.size, ok: f.ok})
				return v
			}
			r := Region{Name: lay.name, Base: at(l.mlBase), Size: at(l.mlSize), TextSize: at(l.mlTextSize), Init: lay.name == "init"}
			if lay.name == "core" {
				m.TextBase = r.Base
			}
			add(r)
		}
	case memFields:
		m.Regions = make([]Region, 0, 2)
		at := func(f fld) uint64 { v, _ := ld.uint(buf, f); return v }
		add(Region{Name: "core", Base: at(l.oldCore), Size: at(l.oldCoreSize), TextSize: at(l.oldCoreText)})
		m.TextBase = at(l.oldCore)
		if l.oldInit.ok {
			add(Region{Name: "init", Base: at(l.oldInit), Size: at(l.oldInitSize), TextSize: at(l.oldInitText), Init: true})
		}
	}
}

// deps follows module.source_list (struct module_use entries) to the names
// of the modules that use this one, as /proc/modules prints them. When the
// list cannot be read to its end, the names read before the break come
// with the error (a *ModuleError): the rest are unknown, not absent.
func (ld *loader) deps(m *Module) ([]string, error) {
	l := ld.l
	head := m.Addr + l.sourceList.off
	deps := []string{}
	fail := func(err error) ([]string, error) {
		return deps, &ModuleError{Name: quoteName(m.Name), Addr: m.Addr, Err: fmt.Errorf("users (source_list at %#x) after %d read: %w", head, len(deps), err)}
	}
	node, err := ld.pointer(head + l.listNext.off)
	if err != nil {
		return fail(err)
	}
	for n := 0; node != head; n++ {
		if n >= MaxModules {
			return fail(corrupt("more than %d entries", MaxModules))
		}
		use := node - l.useSourceList.off
		src, err := ld.pointer(use + l.useSource.off)
		if err != nil {
			return fail(fmt.Errorf("struct module_use at %#x: %w", use, err))
		}
		name, err := memory.CString(ld.kmem, src+l.name.off, int(l.name.size))
		if err != nil {
			return fail(fmt.Errorf("name of the user's struct module at %#x: %w", src, err))
		}
		deps = append(deps, name)
		if node, err = ld.pointer(node + l.listNext.off); err != nil {
			return fail(fmt.Errorf("struct module_use at %#x: %w", use, err))
		}
	}
	return deps, nil
}
