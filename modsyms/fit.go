package modsyms

import "fmt"

// Bounds of a module's fields that any kernel's modules keep within; a
// layout that reads beyond them reads the wrong bytes.
const (
	// maxRegionSize caps one memory region of a module: the largest
	// modules (amdgpu, nvidia) are tens of MiB; the module areas are 1 to
	// 2 GiB.
	maxRegionSize = 1 << 30
	// maxRefCount caps a module's reference count: one per holder, far
	// below this.
	maxRefCount = 1 << 24
	// moduleTaints are the taint bits add_taint_module sets on a module
	// (taintLetters' P F C O E K X T N J).
	moduleTaints = 1<<0 | 1<<1 | 1<<10 | 1<<12 | 1<<13 | 1<<15 | 1<<16 | 1<<17 | 1<<18 | 1<<19
)

// CheckFit checks that the struct layouts the set was read with fit the
// dump's modules: every region's size is within maxRegionSize and its
// range does not wrap, a live module with core memory has a text base,
// the taints are module taint bits, the reference count is plausible, and
// not every module's symbols failed. Layouts from the dump's own BTF or
// inferred from the dump fit by construction; a BTF file or layout table
// from another kernel gives values no kernel has, and CheckFit returns a
// *FitError naming the first such field with its value. layout names the
// layout source for the error.
func (s *Set) CheckFit(layout string) error {
	fail := func(m *Module, field, why string, a ...any) error {
		return &FitError{Layout: layout, Module: quoteName(m.Name), Addr: m.Addr, Field: field, Why: fmt.Sprintf(why, a...)}
	}
	failed := 0
	for _, m := range s.mods {
		for _, r := range m.Regions {
			field := regionField(r)
			if r.Size > maxRegionSize {
				return fail(m, field, "reads %#x, beyond any module's %#x", r.Size, uint64(maxRegionSize))
			}
			if r.Size != 0 && r.Base+r.Size < r.Base {
				return fail(m, field, "reads %#x at base %#x, past the end of the address space", r.Size, r.Base)
			}
		}
		if m.State == StateLive && m.CoreSize > 0 && m.TextBase == 0 {
			return fail(m, "text base", "reads 0 for a live module of %#x bytes", m.CoreSize)
		}
		if m.HasTaints && m.Taints&^moduleTaints != 0 {
			return fail(m, "taints", "reads %#x: bits %#x are no module taint", m.Taints, m.Taints&^moduleTaints)
		}
		if m.HasRefCount && (m.RefCount < -1 || m.RefCount > maxRefCount) {
			return fail(m, "refcnt", "reads %d", m.RefCount)
		}
		if m.Symbols == nil {
			failed++
		}
	}
	if len(s.mods) > 0 && failed == len(s.mods) {
		m := s.mods[0]
		return &FitError{Layout: layout, Field: "symbol tables", Why: fmt.Sprintf("none of the %d modules' could be read (the first, %s: %v)", len(s.mods), quoteName(m.Name), m.Err)}
	}
	return nil
}

// regionField names the field a region's size is read from.
func regionField(r Region) string {
	switch r.Name {
	case "core", "init":
		return r.Name + "_layout.size"
	}
	return "mem[" + r.Name + "].size"
}
