package vmcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Deriving what x86_64 translation needs from a memory image that holds no
// VMCOREINFO note (docs/formats.md §3.7): the release from linux_banner,
// the top-level page table by a scan of physical memory, phys_base and
// _text from the kernel text map it holds.

const (
	x86TextMap = 0xffffffff80000000 // __START_KERNEL_map, PML4[511] PDPT[510]
	x86Start   = 0xffffffff81000000 // __START_KERNEL: _text without KASLR
	// x86AddrMask is the next-table or frame address of an entry, bits 51..12.
	x86AddrMask = 0x000ffffffffff000
	x86Present  = 1 << 0
	x86RW       = 1 << 1
	x86PSE      = 1 << 7
	// maxBannerHits bounds the "Linux version " copies kept (the banner,
	// the log buffer's copy, page cache).
	maxBannerHits = 64
	// maxRootTables bounds the distinct PDPTs (and so PDs and their page
	// tables) that root candidates point to and that are examined: every
	// process's PGD shares the kernel's, so a real image has a handful.
	maxRootTables = 256
	// maxRootsKept bounds the candidate roots remembered for reporting and
	// the self-map test.
	maxRootsKept = 4096
	// maxPageTables bounds the 4 KiB page tables read from all PDs: a
	// real text map has one PD with a few dozen.
	maxPageTables = 2048
)

var bannerPrefix = []byte("Linux version ")

// errPageTables is the error of text maps that take more than
// maxPageTables page tables.
func errPageTables() error {
	e := deriveErr(ErrTooManyTables, "more than %d page tables in the kernel text maps of the candidate top-level tables: not a kernel's", maxPageTables)
	e.MaxTables = maxPageTables
	return e
}

// bannerHit is a "Linux version <release> (" string in physical memory.
type bannerHit struct {
	pa      uint64
	release string
}

// textRun is a linear stretch of the kernel text map: va..va+size-1 maps
// to pa..pa+size-1.
type textRun struct{ va, pa, size uint64 }

// textMap is what one PD (PML4[511] → PDPT[510]) maps, in ascending VA.
type textMap struct {
	pd   uint64
	runs []textRun
	err  error
}

// translate returns the physical address of va in m.
func (m *textMap) translate(va uint64) (uint64, bool) {
	for _, r := range m.runs {
		if va >= r.va && va-r.va < r.size {
			return r.pa + (va - r.va), true
		}
	}
	return 0, false
}

// reverse returns the virtual address that maps pa in m.
func (m *textMap) reverse(pa uint64) (uint64, bool) {
	for _, r := range m.runs {
		if pa >= r.pa && pa-r.pa < r.size {
			return r.va + (pa - r.pa), true
		}
	}
	return 0, false
}

// derivedX86 is the outcome of deriveX86.
type derivedX86 struct {
	release  string
	banner   uint64 // physical address of the banner the text map maps
	bannerVA uint64
	root     uint64 // physical address of init_top_pgt
	rootVA   uint64
	physBase uint64
	text     uint64 // _text: the lowest address the text map maps
	roots    int    // candidate top-level tables that map the banner
}

// vmcoreinfo returns the VMCOREINFO lines the rest of the pipeline reads.
func (x *derivedX86) vmcoreinfo() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "OSRELEASE=%s\n", x.release)
	fmt.Fprintf(&b, "PAGESIZE=4096\n")
	fmt.Fprintf(&b, "SYMBOL(_text)=%x\n", x.text)
	fmt.Fprintf(&b, "SYMBOL(init_top_pgt)=%x\n", x.rootVA)
	fmt.Fprintf(&b, "NUMBER(phys_base)=%d\n", int64(x.physBase))
	if x.text >= x86Start {
		fmt.Fprintf(&b, "KERNELOFFSET=%x\n", x.text-x86Start)
	}
	return []byte(b.String())
}

// describe says how the values were found, for InfoSource.
func (x *derivedX86) describe() string {
	return fmt.Sprintf("derived from the image (x86_64: release %q from the \"Linux version\" banner at %#x; top-level page table at %#x, the one of %d candidates mapping the banner that maps itself, so init_top_pgt %#x; banner at %#x, so phys_base %#x; lowest text-map address _text %#x, to be confirmed by kallsyms)",
		x.release, x.banner, x.root, x.roots, x.rootVA, x.bannerVA, x.physBase, x.text)
}

// x86Scan is what one pass over physical memory collects.
type x86Scan struct {
	banners []bannerHit
	// roots maps a PDPT's physical address to the candidate roots
	// pointing to it (at most maxRootsKept in all).
	roots     map[uint64][]uint64
	order     []uint64 // PDPT addresses in the order found
	kept      int
	overflow  bool // more distinct PDPTs than maxRootTables
	bannerCut bool // more banner copies than maxBannerHits
}

// scanImage reads saved memory once, in ascending order, at most limit
// bytes, and collects the banner copies and, for x86_64 when x86 is set,
// pages that look like a 4-level top-level table (entry 511 a present,
// writable table, no PSE, and every other kernel-half entry 256..510 zero
// or the same) and, for arm64 when arm is not nil, the pages arm takes
// for a top-level table of some layout. An image whose architecture is
// unknown is read once for both.
func scanImage(phys memory.Reader, ranges func(func(uint64, uint64) bool), limit uint64, x86 bool, arm *armWalker) (*x86Scan, *armScan) {
	var xs *x86Scan
	var as *armScan
	if x86 {
		xs = &x86Scan{roots: map[uint64][]uint64{}}
	}
	if arm != nil {
		as = &armScan{}
	}
	var banners []bannerHit
	var cut bool
	scanPages(phys, ranges, limit, func(b []byte, addr uint64) {
		banners = appendBanners(banners, b, addr, &cut)
	}, func(p []byte, pa uint64) {
		if xs != nil {
			xs.page(p, pa, binary.LittleEndian)
		}
		if as != nil {
			as.page(arm, p, pa)
		}
	})
	if xs != nil {
		xs.banners, xs.bannerCut = banners, cut
	}
	if as != nil {
		as.banners, as.bannerCut = banners, cut
	}
	return xs, as
}

// scanPages reads saved memory in ascending order, at most limit bytes,
// handing each chunk (overlapping the next by 128 bytes, so a banner
// across a boundary is seen) to chunk and each whole 4 KiB page once to
// page.
func scanPages(phys memory.Reader, ranges func(func(uint64, uint64) bool), limit uint64, chunk func(b []byte, addr uint64), page func(p []byte, pa uint64)) {
	const overlap = 128 // a banner prefix and release across a chunk boundary
	walkChunks(phys, ranges, limit, overlap, func(b []byte, addr, body uint64) bool {
		chunk(b, addr)
		// Whole pages in the part of the chunk not overlapped.
		for off := (-addr) & 4095; off+4096 <= body; off += 4096 {
			page(b[off:off+4096], addr+off)
		}
		return true
	})
}

// isTable reports whether e is a present, writable next-level table entry
// with no bits set above the address (bit 63, NX, is allowed).
func isTable(e uint64) bool {
	return e&(x86Present|x86RW|x86PSE) == x86Present|x86RW && e&0x7ff0000000000000 == 0
}

func (s *x86Scan) page(p []byte, pa uint64, bo binary.ByteOrder) {
	e511 := bo.Uint64(p[511*8:])
	if !isTable(e511) {
		return
	}
	for i := 256; i < 511; i++ {
		if e := bo.Uint64(p[i*8:]); e != 0 && !isTable(e) {
			return
		}
	}
	pdpt := e511 & x86AddrMask
	if _, ok := s.roots[pdpt]; !ok {
		if len(s.order) >= maxRootTables {
			s.overflow = true
			return
		}
		s.order = append(s.order, pdpt)
		s.roots[pdpt] = nil
	}
	if s.kept < maxRootsKept {
		s.roots[pdpt] = append(s.roots[pdpt], pa)
		s.kept++
	}
}

// appendBanners adds the "Linux version <release> (" strings of b (at
// physical address addr) to hits.
func appendBanners(hits []bannerHit, b []byte, addr uint64, cut *bool) []bannerHit {
	for i := 0; ; {
		j := bytes.Index(b[i:], bannerPrefix)
		if j < 0 {
			return hits
		}
		pos := i + j
		i = pos + 1
		rel := b[pos+len(bannerPrefix):]
		k := 0
		for k < len(rel) && k <= 64 && rel[k] > ' ' && rel[k] < 0x7f {
			k++
		}
		if k == 0 || k > 64 || k+1 >= len(rel) || rel[k] != ' ' || rel[k+1] != '(' {
			continue
		}
		h := bannerHit{addr + uint64(pos), string(rel[:k])}
		if slices.Contains(hits, h) {
			continue // the chunk overlap
		}
		if len(hits) >= maxBannerHits {
			*cut = true
			return hits
		}
		hits = append(hits, h)
	}
}

// readTextMap reads the PD at pd: its present 2 MiB entries and the
// present entries of its page tables, merged into linear runs. Each page
// table read takes one from budget; when none is left the PD maps nothing.
func readTextMap(phys memory.Reader, bo binary.ByteOrder, pd uint64, budget *int) *textMap {
	m := &textMap{pd: pd}
	var tab [4096]byte
	if err := memory.ReadFull(phys, tab[:], pd); err != nil {
		m.err = fmt.Errorf("PD at %#x: %w", pd, err)
		return m
	}
	add := func(va, pa, size uint64) {
		if n := len(m.runs); n > 0 {
			r := &m.runs[n-1]
			if r.va+r.size == va && r.pa+r.size == pa {
				r.size += size
				return
			}
		}
		m.runs = append(m.runs, textRun{va, pa, size})
	}
	var pt [4096]byte
	for i := range 512 {
		e := bo.Uint64(tab[i*8:])
		if e&x86Present == 0 {
			continue
		}
		va := x86TextMap + uint64(i)<<21
		if e&x86PSE != 0 {
			add(va, e&x86AddrMask&^(1<<21-1), 1<<21)
			continue
		}
		if *budget <= 0 {
			m.err = fmt.Errorf("PD at %#x: %w", pd, errPageTables())
			m.runs = nil
			return m
		}
		*budget--
		if err := memory.ReadFull(phys, pt[:], e&x86AddrMask); err != nil {
			if m.err == nil {
				m.err = fmt.Errorf("page table of %#x at %#x: %w", va, e&x86AddrMask, err)
			}
			continue
		}
		for j := range 512 {
			if pe := bo.Uint64(pt[j*8:]); pe&x86Present != 0 {
				add(va+uint64(j)<<12, pe&x86AddrMask, 1<<12)
			}
		}
	}
	return m
}

// deriveX86 finds the release, init_top_pgt, phys_base and _text of an
// x86_64 kernel from physical memory alone (docs/formats.md §3.7). Every
// value is checked: the text map of the chosen table maps the banner, the
// table maps itself at its text-map address, and candidates that disagree
// are an error naming them.
func deriveX86(phys memory.Reader, ranges func(func(uint64, uint64) bool), limit uint64) (*derivedX86, error) {
	s, _ := scanImage(phys, ranges, limit, true, nil)
	return deriveX86From(phys, s, limit)
}

// deriveX86From is deriveX86 on what scanImage collected.
func deriveX86From(phys memory.Reader, s *x86Scan, limit uint64) (*derivedX86, error) {
	bo := binary.LittleEndian
	if len(s.banners) == 0 {
		return nil, errNoBanner(limit)
	}
	if len(s.order) == 0 {
		return nil, deriveErr(ErrNoPageTable, "no page that looks like a 4-level top-level page table (entry 511 a present table) in saved memory")
	}
	if s.overflow {
		e := deriveErr(ErrTooManyTables, "more than %d distinct kernel-half tables among the candidate top-level page tables: not a kernel's", maxRootTables)
		e.MaxTables = maxRootTables
		return nil, e
	}
	type cand struct {
		root uint64
		m    *textMap
		hit  bannerHit
		va   uint64
	}
	maps := map[uint64]*textMap{}
	budget := maxPageTables
	var cands []cand
	var firstErr error
	for _, pdpt := range s.order {
		e, err := memory.Uint64(phys, bo, pdpt+510*8)
		if err != nil || !isTable(e) {
			continue
		}
		pd := e & x86AddrMask
		m, ok := maps[pd]
		if !ok {
			m = readTextMap(phys, bo, pd, &budget)
			maps[pd] = m
			if errors.Is(m.err, ErrTooManyTables) {
				return nil, m.err
			}
		}
		if m.err != nil && firstErr == nil {
			firstErr = m.err
		}
		for _, h := range s.banners {
			va, ok := m.reverse(h.pa)
			if !ok {
				continue
			}
			for _, r := range s.roots[pdpt] {
				cands = append(cands, cand{r, m, h, va})
			}
			break
		}
	}
	if len(cands) == 0 {
		var pas []string
		e := deriveErr(ErrNoPageTable, "")
		for _, h := range s.banners {
			pas = append(pas, fmt.Sprintf("%#x (%s)", h.pa, h.release))
			e.Banners = append(e.Banners, h.pa)
		}
		e.msg = fmt.Sprintf("no candidate top-level page table (%d examined) maps a banner copy (%s) in the kernel text map [%#x, %#x)", len(s.order), strings.Join(pas, ", "), uint64(x86TextMap), uint64(x86TextMap+1<<30))
		e.Examined, e.Err = len(s.order), firstErr
		return nil, e
	}
	// The candidates share the kernel's mappings: they must agree.
	var self []cand
	for _, c := range cands {
		c0 := cands[0]
		d0, d := c0.va-c0.hit.pa, c.va-c.hit.pa
		if c.hit.release != c0.hit.release || d != d0 || c.m.runs[0].va != c0.m.runs[0].va {
			e := deriveErr(ErrAmbiguous, "top-level page table candidates disagree: %#x maps %q at %#x (va−pa %#x, lowest %#x), %#x maps %q at %#x (va−pa %#x, lowest %#x)",
				c0.root, c0.hit.release, c0.va, d0, c0.m.runs[0].va, c.root, c.hit.release, c.va, d, c.m.runs[0].va)
			e.Tables = []uint64{c0.root, c.root}
			return nil, e
		}
		if pa, ok := c.m.translate(c.root + d); ok && pa == c.root {
			self = append(self, c)
		}
	}
	roots := func(cs []cand) string {
		var out []string
		for i, c := range cs {
			if i == 8 {
				out = append(out, fmt.Sprintf("and %d more", len(cs)-i))
				break
			}
			out = append(out, fmt.Sprintf("%#x", c.root))
		}
		return strings.Join(out, ", ")
	}
	tables := func(cs []cand) []uint64 {
		var out []uint64
		for _, c := range cs {
			out = append(out, c.root)
		}
		return out
	}
	switch len(self) {
	case 0:
		e := deriveErr(ErrNoPageTable, "none of the %d top-level page tables mapping the banner (%s) lies in the kernel image (maps itself at its text-map address): no init_top_pgt", len(cands), roots(cands))
		e.Tables = tables(cands)
		return nil, e
	case 1:
	default:
		e := deriveErr(ErrAmbiguous, "%d top-level page tables map the banner and themselves in the kernel image (%s): which is init_top_pgt is ambiguous", len(self), roots(self))
		e.Tables = tables(self)
		return nil, e
	}
	c := self[0]
	delta := c.va - c.hit.pa
	low := c.m.runs[0]
	if low.va-low.pa != delta {
		e := deriveErr(ErrNoPageTable, "the lowest text-map address %#x maps %#x, not linearly with the banner (%#x at %#x) in the table at %#x", low.va, low.pa, c.hit.pa, c.va, c.root)
		e.Tables, e.Banners = []uint64{c.root}, []uint64{c.hit.pa}
		return nil, e
	}
	for _, h := range s.banners {
		if h.release != c.hit.release {
			if _, ok := c.m.reverse(h.pa); ok {
				e := deriveErr(ErrAmbiguous, "the kernel image holds banners of two releases: %q at %#x and %q at %#x", c.hit.release, c.hit.pa, h.release, h.pa)
				e.Banners = []uint64{c.hit.pa, h.pa}
				return nil, e
			}
		}
	}
	return &derivedX86{
		release:  c.hit.release,
		banner:   c.hit.pa,
		bannerVA: c.va,
		root:     c.root,
		rootVA:   c.root + delta,
		physBase: c.hit.pa - (c.va - x86TextMap),
		text:     low.va,
		roots:    len(cands),
	}, nil
}

// derive fills in VMCOREINFO for a memory image that holds no note, from
// memory alone (x86_64 and arm64), or records why it could not.
func (d *Dump) derive(opt Options, arch string) {
	limit := uint64(DefaultScanLimit)
	if opt.ScanLimit > 0 {
		limit = uint64(opt.ScanLimit)
	}
	// One pass over memory for every architecture the image may be.
	var w *armWalker
	if arch == "" || arch == "arm64" {
		w = newArmWalker(d.phys, d.be.ranges)
	}
	xs, as := scanImage(d.phys, d.be.ranges, limit, arch == "" || arch == "x86_64", w)
	const why = "no VMCOREINFO note in the image, and it could not be derived (only x86_64 and arm64 kernels are)"
	if xs != nil && len(xs.banners) == 0 || as != nil && len(as.banners) == 0 {
		// The scans share their banners: one cause, said once.
		d.deriveErr = memory.WithRemedy(fmt.Errorf("%s: %w", why, errNoBanner(limit)), memory.SupplyVMCOREINFO)
		return
	}
	var errX86, errARM error
	if xs != nil {
		x, err := deriveX86From(d.phys, xs, limit)
		if err == nil {
			d.origin = InfoOrigin{Kind: InfoDerived, Addr: x.root}
			d.raw, d.infoSource = x.vmcoreinfo(), x.describe()
			return
		}
		errX86 = fmt.Errorf("x86_64: %w", err)
	}
	if as != nil {
		x, err := deriveARM64From(w, as, limit)
		if err == nil {
			d.origin = InfoOrigin{Kind: InfoDerived, Addr: x.root}
			d.raw, d.infoSource = x.vmcoreinfo(), x.describe()
			return
		}
		errARM = fmt.Errorf("arm64: %w", err)
	}
	switch {
	case errX86 != nil && errARM != nil:
		// One line: a report prints each cause on one.
		d.deriveErr = memory.WithRemedy(fmt.Errorf("%s: %w; %w", why, errX86, errARM), memory.SupplyVMCOREINFO)
	case errX86 != nil:
		d.deriveErr = memory.WithRemedy(fmt.Errorf("%s: %w", why, errX86), memory.SupplyVMCOREINFO)
	default:
		d.deriveErr = memory.WithRemedy(fmt.Errorf("%s: %w", why, errARM), memory.SupplyVMCOREINFO)
	}
}

// errNoBanner is the error of a derivation that found no kernel banner
// in the at most limit bytes it read.
func errNoBanner(limit uint64) error {
	e := deriveErr(ErrNoBanner, "%v (at most %d MiB read)", ErrNoBanner, limit>>20)
	e.Scanned = limit
	return e
}

// DeriveErr says why VMCOREINFO could not be derived from a memory image
// that holds no note (docs/formats.md §3.7), or nil: when it was derived,
// found, or not looked for. It wraps a *DeriveError for each architecture
// tried (one when no banner was found: the scans share it), matching
// ErrNoBanner, ErrNoPageTable, ErrAmbiguous or ErrTooManyTables.
func (d *Dump) DeriveErr() error { return d.deriveErr }
