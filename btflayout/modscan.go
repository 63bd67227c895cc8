package btflayout

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Module list discovery: the head of the kernel's modules list found in a
// dump whose symbols do not include modules (kallsyms without
// CONFIG_KALLSYMS_ALL).
//
// Every struct module lives in memory the kernel got from vmalloc (the
// module region, or on arm64 a window of 2 GiB around the kernel image).
// The kernel lists its vmalloc areas on vmap_area_list, which VMCOREINFO
// exports with the offsets of vmap_area.va_start and vmap_area.list (v3.12
// to v6.8, for makedumpfile). Discovery walks that list, reads the areas
// that lie in the module ranges page by page, and takes as a candidate a
// word-aligned list_head whose neighbours point back at it, preceded by a
// valid module_state and followed by a valid module name. From a candidate
// it follows the list around; the one node of the cycle that is no module
// is the head. Infer, run on that head, then checks every module's symbol
// table: a candidate that fails is dropped and the next one tried.

// ModuleScanConfig says where discovery may look.
type ModuleScanConfig struct {
	InferConfig // Head is ignored
	// VmapAreaList is the address of vmap_area_list; VAStart and VAList
	// are the offsets of vmap_area.va_start and vmap_area.list (all from
	// VMCOREINFO). va_end follows va_start.
	VmapAreaList, VAStart, VAList uint64
	// Ranges are the [lo, hi) address ranges modules may live in, most
	// likely first.
	Ranges [][2]uint64
	// Mapped, when VmapAreaList is 0 (v6.9+ dropped the list), lists the
	// mapped runs of a range from the page tables; Exclude are ranges not
	// to scan (the kernel image, when it lies inside Ranges).
	Mapped  func(lo, hi uint64, yield func(start, end uint64) bool) error
	Exclude [][2]uint64
	// DirectMap is the base of the linear map of physical memory, if it
	// lies in Ranges (i386): the mapped run that starts there is all of
	// RAM, not module memory, and is skipped.
	DirectMap uint64
}

// Discovery bounds.
const (
	// maxVmapAreas bounds the vmap_area_list walk: a large server has tens
	// of thousands of vmalloc areas.
	maxVmapAreas = 1 << 20
	// maxScanArea bounds the bytes read of one area (the largest modules,
	// amdgpu among them, take about 20 MiB).
	maxScanArea = 64 << 20
	// maxScanBytes bounds the bytes read by one discovery in all.
	maxScanBytes = 256 << 20
	// maxModuleCandidates bounds the candidates given to Infer.
	maxModuleCandidates = 16
	// scanChunk is the size of one read of a module area.
	scanChunk = 64 << 10
)

// FindModuleList finds the modules list head by a validated scan of the
// module areas on vmap_area_list, and returns it with the layouts Infer
// found from it (the proof that the list is the kernel's).
//
// A broken or looped vmap_area_list, no candidate, and candidates that all
// fail are errors wrapping ErrNotFound or ErrCorrupt, naming what was
// tried; an incomplete cfg.Target is one wrapping memory.ErrUnknownTarget.
func FindModuleList(kmem memory.Reader, cfg ModuleScanConfig) (uint64, *Inferred, error) {
	if err := cfg.Target.Check(); err != nil {
		return 0, nil, fmt.Errorf("btflayout: module list scan: %w", err)
	}
	x := newInfer(kmem, cfg.Target)
	p := x.p
	var areas [][2]uint64
	var err error
	switch {
	case cfg.VmapAreaList != 0:
		areas, err = x.vmapAreas(cfg)
	case cfg.Mapped != nil:
		areas, err = mappedAreas(cfg)
	default:
		return 0, nil, fmt.Errorf("btflayout: module list scan: no vmap_area_list in VMCOREINFO and no page tables to list module memory: %w", ErrNotFound)
	}
	if err != nil {
		return 0, nil, err
	}
	var tried int
	var lastErr error
	var read uint64
	seenHeads := map[uint64]bool{}
	// The unit an absent page cuts a chunk at: the kernel's page (64 KiB
	// on Debian's ppc64el 6.1), else 4 KiB.
	page := uint64(4096)
	if ps := cfg.Target.PageSize; ps > 0 {
		page = uint64(ps)
	}
	for _, a := range areas {
		size := min(a[1]-a[0], maxScanArea)
		for off := uint64(0); off < size; {
			if read >= maxScanBytes {
				return 0, nil, fmt.Errorf("btflayout: module list scan: no module found in the first %d bytes of %d module areas (last: %v): %w", read, len(areas), lastErr, ErrNotFound)
			}
			// A chunk, and the name that may run past its end; a chunk
			// with an absent page is cut there, and the scan resumes
			// after that page.
			data := readUpTo(kmem, a[0]+off, min(scanChunk+64, size-off))
			step := uint64(scanChunk)
			if uint64(len(data)) < min(scanChunk+64, size-off) {
				step = min(step, (uint64(len(data))/page+1)*page)
			}
			read += uint64(len(data))
			for o := uint64(0); o+2*p+(64-p) <= uint64(len(data)) && o < step; o += p {
				node := a[0] + off + o
				if !x.isModuleNode(data, o, node) {
					continue
				}
				head, err := x.headFrom(node)
				if err == nil && seenHeads[head] {
					continue
				}
				if err == nil {
					seenHeads[head] = true
					var in *Inferred
					ic := cfg.InferConfig
					ic.Head = head
					if in, err = Infer(kmem, ic); err == nil {
						return head, in, nil
					}
				}
				lastErr = fmt.Errorf("candidate %#x: %w", node, err)
				if tried++; tried >= maxModuleCandidates {
					return 0, nil, fmt.Errorf("btflayout: module list scan: %d candidates failed (last: %v): %w", tried, lastErr, ErrNotFound)
				}
			}
			off += step
		}
	}
	if lastErr != nil {
		return 0, nil, fmt.Errorf("btflayout: module list scan: %d candidates in %d module areas failed (last: %w)", tried, len(areas), lastErr)
	}
	return 0, nil, fmt.Errorf("btflayout: module list scan: no struct module in %d vmalloc areas of the module ranges (%d bytes read): %w", len(areas), read, ErrNotFound)
}

// vmapAreas walks vmap_area_list and returns the [start, end) of the areas
// inside cfg.Ranges, in the order of the ranges.
func (x *infer) vmapAreas(cfg ModuleScanConfig) ([][2]uint64, error) {
	head := cfg.VmapAreaList
	perRange := make([][][2]uint64, len(cfg.Ranges))
	seen := map[uint64]bool{head: true}
	prev := head
	node, err := x.ptr(head)
	if err != nil {
		return nil, fmt.Errorf("btflayout: vmap_area_list at %#x: %w", head, err)
	}
	for n := 0; node != head; n++ {
		if n >= maxVmapAreas || seen[node] {
			return nil, inferErr("vmap_area_list at %#x loops or exceeds %d areas at %#x", head, maxVmapAreas, node)
		}
		seen[node] = true
		var raw [16]byte
		if err := memory.ReadFull(x.kmem, raw[:2*x.p], node); err != nil {
			return nil, fmt.Errorf("btflayout: vmap_area_list node %#x: %w", node, err)
		}
		next, back := x.word(raw[:], 0), x.word(raw[:], x.p)
		if back != prev {
			return nil, inferErrAt(ListBroken, node, "vmap_area_list node %#x: prev is %#x, not %#x", node, back, prev)
		}
		va := node - cfg.VAList + cfg.VAStart
		var se [16]byte
		if err := memory.ReadFull(x.kmem, se[:2*x.p], va); err != nil {
			return nil, fmt.Errorf("btflayout: vmap_area at %#x: %w", node-cfg.VAList, err)
		}
		start, end := x.word(se[:], 0), x.word(se[:], x.p)
		if end > start {
			for i, r := range cfg.Ranges {
				if start >= r[0] && start < r[1] {
					perRange[i] = append(perRange[i], [2]uint64{start, end})
					break
				}
			}
		}
		prev, node = node, next
	}
	var out [][2]uint64
	for _, r := range perRange {
		out = append(out, r...)
	}
	return out, nil
}

// isModuleNode reports whether the list_head at page[o:] (address node)
// looks like struct module's: a valid state before it, a valid name after
// it, and neighbours that point back at it.
func (x *infer) isModuleNode(page []byte, o, node uint64) bool {
	p := x.p
	if o < p || x.u32(page, o-p) > 3 {
		return false
	}
	next, prev := x.word(page, o), x.word(page, o+p)
	if next == 0 || prev == 0 || next == node || next%p != 0 || prev%p != 0 {
		return false
	}
	if !validModuleName(page[o+2*p : o+2*p+64-p]) {
		return false
	}
	b, err := x.ptr(next + p)
	if err != nil || b != node {
		return false
	}
	f, err := x.ptr(prev)
	return err == nil && f == node
}

// headFrom follows the list from a module's node around, checking links
// both ways, and returns the one node that is no module.
func (x *infer) headFrom(start uint64) (uint64, error) {
	p := x.p
	var heads []uint64
	seen := map[uint64]bool{}
	prev := start
	node, err := x.ptr(start)
	for n := 0; ; n++ {
		if err != nil {
			return 0, err
		}
		if n > inferMaxModules || seen[node] {
			return 0, inferErr("the list through %#x loops without returning", start)
		}
		seen[node] = true
		var raw [128]byte
		b := raw[:3*p+64-p]
		if err := memory.ReadFull(x.kmem, b, node-p); err != nil {
			// The head may sit where the bytes around it cannot be read.
			b = nil
		}
		back, err := x.ptr(node + p)
		if err != nil {
			return 0, err
		}
		if back != prev {
			return 0, inferErrAt(ListBroken, node, "list node %#x: prev is %#x, not %#x", node, back, prev)
		}
		if b == nil || x.u32(b, 0) > 3 || !validModuleName(b[3*p:]) {
			heads = append(heads, node)
		}
		if node == start {
			break
		}
		prev = node
		node, err = x.ptr(node)
	}
	if len(heads) != 1 {
		return 0, inferErr("the list through %#x has %d nodes that are no module, not one", start, len(heads))
	}
	return heads[0], nil
}

// maxMappedRuns bounds the runs taken from the page tables.
const maxMappedRuns = 1 << 16

// mappedAreas lists the mapped runs of cfg.Ranges from the page tables,
// less cfg.Exclude.
func mappedAreas(cfg ModuleScanConfig) ([][2]uint64, error) {
	var out [][2]uint64
	for _, r := range cfg.Ranges {
		err := cfg.Mapped(r[0], r[1], func(start, end uint64) bool {
			if cfg.DirectMap != 0 && start == cfg.DirectMap {
				return true
			}
			for _, piece := range cut([2]uint64{start, end}, cfg.Exclude) {
				out = append(out, piece)
			}
			return len(out) < maxMappedRuns
		})
		if err != nil {
			return nil, fmt.Errorf("btflayout: module list scan: page tables of [%#x, %#x): %w", r[0], r[1], err)
		}
	}
	return out, nil
}

// cut removes the excluded ranges from a.
func cut(a [2]uint64, excl [][2]uint64) [][2]uint64 {
	parts := [][2]uint64{a}
	for _, e := range excl {
		var next [][2]uint64
		for _, p := range parts {
			if e[1] <= p[0] || e[0] >= p[1] {
				next = append(next, p)
				continue
			}
			if p[0] < e[0] {
				next = append(next, [2]uint64{p[0], e[0]})
			}
			if e[1] < p[1] {
				next = append(next, [2]uint64{e[1], p[1]})
			}
		}
		parts = next
	}
	return parts
}
