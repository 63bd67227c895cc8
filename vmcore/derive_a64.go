package vmcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Deriving what arm64 translation needs from a memory image that holds no
// VMCOREINFO note (docs/formats.md §3.7), 4 KiB granule: the release from
// linux_banner; swapper_pg_dir by a scan of physical memory for pages that
// look like a TTBR1 top-level table; kimage_voffset from the kernel-image
// mapping of the banner (upper half of the kernel VA range); PHYS_OFFSET
// from the linear map (lower half), checked on the banner; the image start
// from the lowest address mapped at kimage_voffset.

// armLayout is one 4 KiB-granule TTBR1 layout tried.
type armLayout struct {
	vaBits uint
	levels int  // levels walked; 1 is the page level
	lpa2   bool // 52-bit: OA[51:50] in descriptor bits 9:8
}

// armLayouts are tried in order; the first one under which a candidate
// maps itself wins. 48 bits (Debian ≤ 6.1, and 52-bit kernels on 48-bit
// hardware), 52 bits with LPA2 (Debian 6.12 on LPA2 hardware), 39 bits.
var armLayouts = []armLayout{{48, 4, false}, {52, 5, true}, {39, 3, false}}

const (
	// maxArmTables bounds the page tables the arm64 derivation reads in
	// all (the upper-half walks of every candidate): a small guest's
	// vmalloc, vmemmap and kernel-image maps take a few hundred.
	maxArmTables = 8192
	// maxArmImage bounds how far below the banner the image start is
	// looked for (the kernel image is tens of MiB).
	maxArmImage  = 256 << 20
	armKimgAlign = 2 << 20 // MIN_KIMG_ALIGN: KASLR offsets are multiples
)

// errArmTables is the error of candidate tables whose walks take more
// than maxArmTables page tables.
func errArmTables() error {
	e := deriveErr(ErrTooManyTables, "more than %d page tables read in the upper halves of the candidate top-level tables: not a kernel's", maxArmTables)
	e.MaxTables = maxArmTables
	return e
}

func (l armLayout) shift(lvl int) uint { return 12 + 9*uint(lvl-1) }

func (l armLayout) entries(lvl int) uint64 {
	if lvl == l.levels {
		return 1 << (l.vaBits - l.shift(lvl))
	}
	return 512
}

func (l armLayout) oa(e uint64) uint64 {
	if l.lpa2 {
		return e&0x0003fffffffff000 | (e>>8&3)<<50
	}
	return e & 0x0000fffffffff000
}

// isTable reports whether e is a next-level table descriptor as Linux
// writes them: type 0b11, the ignored bits 2..11 and 51..58 clear (but
// OA[51:50] in bits 9:8 with LPA2), table attributes 59..63 allowed.
func (l armLayout) isTable(e uint64) bool {
	low := uint64(0xffc)
	if l.lpa2 {
		low = 0xcfc
	}
	return e&3 == 3 && e&low == 0 && e>>51&0xff == 0
}

// leafSize returns the size a level-lvl leaf descriptor e maps: a page
// at level 1, a block at 2 and 3, with the access flag set (Linux maps
// nothing valid without it); 0 when e is not one.
func (l armLayout) leafSize(e uint64, lvl int) uint64 {
	if e&(1<<10) == 0 {
		return 0
	}
	if e&3 == 3 && lvl == 1 || e&3 == 1 && (lvl == 2 || lvl == 3) {
		return 1 << l.shift(lvl)
	}
	return 0
}

// base is the lowest kernel VA: PAGE_OFFSET since v5.4.
func (l armLayout) base() uint64 { return ^uint64(0) << l.vaBits }

func (l armLayout) String() string {
	return fmt.Sprintf("%d-bit VA, %d levels", l.vaBits, l.levels)
}

// armWalker walks candidate tables with a shared budget of tables read.
type armWalker struct {
	phys   memory.Reader
	bo     binary.ByteOrder
	budget int
	ram    [][2]uint64
	memo   map[armKey][]relHit
	// firstErr is the first table that could not be read.
	firstErr error
}

func (w *armWalker) inRAM(pa uint64) bool {
	for _, r := range w.ram {
		if pa >= r[0] && pa <= r[1] {
			return true
		}
	}
	return false
}

// walk translates va through root under l: the physical address and the
// size of the leaf that maps it.
func (w *armWalker) walk(l armLayout, root, va uint64) (uint64, uint64, bool) {
	table := root
	for lvl := l.levels; lvl >= 1; lvl-- {
		sh := l.shift(lvl)
		idx := va >> sh & (l.entries(lvl) - 1)
		e, err := memory.Uint64(w.phys, w.bo, table+idx*8)
		if err != nil {
			return 0, 0, false
		}
		if size := l.leafSize(e, lvl); size != 0 {
			return l.oa(e)&^(size-1) | va&(size-1), size, true
		}
		if lvl == 1 || !l.isTable(e) {
			return 0, 0, false
		}
		table = l.oa(e)
	}
	return 0, 0, false
}

// leaves calls leaf for every mapping of table (at level lvl, mapping VAs
// from va) in VA order, its entries [from, to); leaf returns false to
// stop. Each table descended into takes one from the budget, and is
// descended into once (seen).
func (w *armWalker) leaves(l armLayout, table uint64, lvl int, va uint64, from, to uint64, seen map[uint64]bool, leaf func(va, pa, size uint64) bool) (bool, error) {
	var tab [4096]byte
	if err := memory.ReadFull(w.phys, tab[:to*8], table); err != nil {
		return true, fmt.Errorf("level %d table at %#x: %w", lvl, table, err)
	}
	sh := l.shift(lvl)
	for i := from; i < to; i++ {
		e := w.bo.Uint64(tab[i*8:])
		v := va + i<<sh
		switch {
		case l.leafSize(e, lvl) != 0:
			if !leaf(v, l.oa(e)&^(1<<sh-1), 1<<sh) {
				return false, nil
			}
		case lvl > 1 && l.isTable(e):
			if seen[l.oa(e)] {
				continue
			}
			seen[l.oa(e)] = true
			if w.budget <= 0 {
				return false, errArmTables()
			}
			w.budget--
			more, err := w.leaves(l, l.oa(e), lvl-1, v, 0, 512, seen, leaf)
			if errors.Is(err, ErrTooManyTables) || !more {
				return more, err
			}
		}
	}
	return true, nil
}

// relHit is a banner copy mapped by a table: off is its VA less the VA
// the table starts at.
type relHit struct {
	off    uint64
	banner int
}

type armKey struct {
	table uint64
	lvl   int
	lpa2  bool
}

// bannerHits returns the banner copies the table at pa (level lvl) maps,
// memoized: candidate roots share their subtrees, and a table met again
// below itself (a loop) maps nothing more. Each table read takes one
// from the budget.
func (w *armWalker) bannerHits(l armLayout, pa uint64, lvl int, banners []bannerHit) ([]relHit, error) {
	k := armKey{pa, lvl, l.lpa2}
	if h, ok := w.memo[k]; ok {
		return h, nil
	}
	w.memo[k] = nil // in progress: a loop back here adds nothing
	if w.budget <= 0 {
		return nil, errArmTables()
	}
	w.budget--
	var tab [4096]byte
	if err := memory.ReadFull(w.phys, tab[:], pa); err != nil {
		if w.firstErr == nil {
			w.firstErr = fmt.Errorf("level %d table at %#x: %w", lvl, pa, err)
		}
		return nil, nil
	}
	sh := l.shift(lvl)
	var out []relHit
	for i := range uint64(512) {
		e := w.bo.Uint64(tab[i*8:])
		switch {
		case l.leafSize(e, lvl) != 0:
			lpa, size := l.oa(e)&^(1<<sh-1), uint64(1)<<sh
			for bi, b := range banners {
				if b.pa >= lpa && b.pa-lpa < size {
					out = append(out, relHit{i<<sh + b.pa - lpa, bi})
				}
			}
		case lvl > 1 && l.isTable(e):
			sub, err := w.bannerHits(l, l.oa(e), lvl-1, banners)
			if err != nil {
				return nil, err
			}
			for _, h := range sub {
				out = append(out, relHit{i<<sh + h.off, h.banner})
			}
		}
		if len(out) > maxBannerHits {
			out = out[:maxBannerHits]
		}
	}
	w.memo[k] = out
	return out, nil
}

// candidate reports whether p looks like a TTBR1 top-level table under l:
// entries past the level's size zero, every other entry zero or a table
// descriptor pointing into saved memory, with at least one in each half
// (linear map below, kernel image and vmalloc above).
func (w *armWalker) candidate(l armLayout, p []byte) bool {
	n := l.entries(l.levels)
	for i := n; i < 512; i++ {
		if w.bo.Uint64(p[i*8:]) != 0 {
			return false
		}
	}
	var lower, upper bool
	for i := range n {
		e := w.bo.Uint64(p[i*8:])
		if e == 0 {
			continue
		}
		if !l.isTable(e) || !w.inRAM(l.oa(e)) {
			return false
		}
		if i < n/2 {
			lower = true
		} else {
			upper = true
		}
	}
	return lower && upper
}

// derivedARM64 is the outcome of deriveARM64.
type derivedARM64 struct {
	layout    armLayout
	release   string
	banner    uint64 // physical address of the banner the image maps
	bannerVA  uint64
	root      uint64 // physical address of swapper_pg_dir
	kvo       uint64 // kimage_voffset
	physOff   uint64 // PHYS_OFFSET
	linearVA  uint64 // the linear-map address of the banner, checked
	low       uint64 // the lowest address mapped at kimage_voffset
	header    bool   // low holds the arm64 Image header: it is _text
	roots     int    // candidates examined
	kimgVaddr uint64 // KIMAGE_VADDR assumed for KERNELOFFSET
}

// text returns _text: low when it holds the Image header, else low (then
// _stext) rounded down to MIN_KIMG_ALIGN.
func (x *derivedARM64) text() uint64 {
	if x.header {
		return x.low
	}
	return x.low &^ (armKimgAlign - 1)
}

func (x *derivedARM64) vmcoreinfo() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "OSRELEASE=%s\n", x.release)
	fmt.Fprintf(&b, "PAGESIZE=4096\n")
	if x.header {
		fmt.Fprintf(&b, "SYMBOL(_text)=%x\n", x.low)
	} else {
		fmt.Fprintf(&b, "SYMBOL(_stext)=%x\n", x.low)
	}
	fmt.Fprintf(&b, "SYMBOL(swapper_pg_dir)=%x\n", x.root+x.kvo)
	fmt.Fprintf(&b, "NUMBER(VA_BITS)=%d\n", x.layout.vaBits)
	fmt.Fprintf(&b, "NUMBER(TCR_EL1_T1SZ)=%#x\n", 64-x.layout.vaBits)
	fmt.Fprintf(&b, "NUMBER(kimage_voffset)=%#x\n", x.kvo)
	fmt.Fprintf(&b, "NUMBER(PHYS_OFFSET)=%#x\n", x.physOff)
	if t := x.text(); t >= x.kimgVaddr {
		fmt.Fprintf(&b, "KERNELOFFSET=%x\n", t-x.kimgVaddr)
	}
	return []byte(b.String())
}

func (x *derivedARM64) describe() string {
	start := "_stext (no Image header there)"
	if x.header {
		start = "_text (Image header)"
	}
	return fmt.Sprintf("derived from the image (arm64: release %q from the \"Linux version\" banner at %#x; top-level page table at %#x (%s), the one of %d candidates for that layout that maps the banner in the kernel image and itself at the same offset, so swapper_pg_dir %#x; banner at %#x, so kimage_voffset %#x; linear map gives PHYS_OFFSET %#x, checked on the banner at %#x; lowest image address %#x taken as %s, to be confirmed by kallsyms; KERNELOFFSET against KIMAGE_VADDR %#x)",
		x.release, x.banner, x.root, x.layout, x.roots, x.root+x.kvo, x.bannerVA, x.kvo, x.physOff, x.linearVA, x.low, start, x.kimgVaddr)
}

// armScan is what one pass over physical memory collects.
type armScan struct {
	banners   []bannerHit
	cands     []armCand
	overflow  bool
	bannerCut bool
}

type armCand struct {
	root   uint64
	layout int // index in armLayouts
}

// kimageVaddr returns KIMAGE_VADDR for release: MODULES_END, 128 MiB of
// modules above PAGE_END before v6.5, 2 GiB since.
func kimageVaddr(l armLayout, release string) uint64 {
	pageEnd := ^uint64(0) << (min(l.vaBits, 48) - 1)
	maj, rest, _ := strings.Cut(release, ".")
	mi, _, _ := strings.Cut(rest, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(strings.TrimRightFunc(mi, func(r rune) bool { return r < '0' || r > '9' }))
	if err1 == nil && err2 == nil && (a > 6 || a == 6 && b >= 5) {
		return pageEnd + 2<<30
	}
	return pageEnd + 128<<20
}

// armImageMagic is the arm64 Image header's magic, at offset 56.
var armImageMagic = []byte("ARM\x64")

// deriveARM64 finds the release, swapper_pg_dir, kimage_voffset,
// PHYS_OFFSET, VA_BITS and the image start of an arm64 kernel from
// physical memory alone (docs/formats.md §3.7). Every value is checked:
// the chosen table maps the banner in its upper half and itself at the
// same offset, the linear map gives the banner back at PHYS_OFFSET, and
// candidates that map themselves are unique.
func deriveARM64(phys memory.Reader, ranges func(func(uint64, uint64) bool), limit uint64) (*derivedARM64, error) {
	w := newArmWalker(phys, ranges)
	_, s := scanImage(phys, ranges, limit, false, w)
	return deriveARM64From(w, s, limit)
}

// newArmWalker is the walker of the arm64 derivation over the saved
// ranges of phys.
func newArmWalker(phys memory.Reader, ranges func(func(uint64, uint64) bool)) *armWalker {
	w := &armWalker{phys: phys, bo: binary.LittleEndian, budget: maxArmTables, memo: map[armKey][]relHit{}}
	ranges(func(s, l uint64) bool { w.ram = append(w.ram, [2]uint64{s, l}); return true })
	return w
}

// page records p, at pa, as a candidate root for every layout it passes.
// A page of zeros, most of a raw image, passes none: it is skipped with
// one comparison instead of each layout's walk over its entries.
func (s *armScan) page(w *armWalker, p []byte, pa uint64) {
	if allZero(p) {
		return
	}
	for i, l := range armLayouts {
		if w.candidate(l, p) {
			if len(s.cands) >= maxRootsKept {
				s.overflow = true
				return
			}
			s.cands = append(s.cands, armCand{pa, i})
		}
	}
}

// allZero reports whether p holds only zero bytes.
func allZero(p []byte) bool {
	var zeros [512]byte
	for len(p) > 0 {
		n := min(len(p), len(zeros))
		if !bytes.Equal(p[:n], zeros[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}

// deriveARM64From is deriveARM64 on what scanImage collected.
func deriveARM64From(w *armWalker, s *armScan, limit uint64) (*derivedARM64, error) {
	if len(s.banners) == 0 {
		return nil, errNoBanner(limit)
	}
	if len(s.cands) == 0 {
		return nil, deriveErr(ErrNoPageTable, "no page that looks like an arm64 4 KiB-granule top-level table (valid table entries into saved memory in both halves) in saved memory")
	}
	if s.overflow {
		e := deriveErr(ErrTooManyTables, "more than %d pages look like an arm64 top-level table: not a kernel's", maxRootsKept)
		e.MaxTables = maxRootsKept
		return nil, e
	}
	type self struct {
		c       armCand
		hit     bannerHit
		va, kvo uint64
	}
	// Every layout is tried: a table of one read as another must not
	// win by coming first.
	var found []*derivedARM64
	var whyNot error
	for li, l := range armLayouts {
		n := 0
		for _, c := range s.cands {
			if c.layout != li {
				continue
			}
			n++
			// Banner copies mapped in the upper half; the first whose
			// offset also maps the table itself.
			var hits []self
			top := l.entries(l.levels)
			var tab [4096]byte
			if err := memory.ReadFull(w.phys, tab[:top*8], c.root); err != nil {
				continue
			}
			sh := l.shift(l.levels)
			for i := top / 2; i < top; i++ {
				e := w.bo.Uint64(tab[i*8:])
				if !l.isTable(e) {
					continue
				}
				sub, err := w.bannerHits(l, l.oa(e), l.levels-1, s.banners)
				if err != nil {
					return nil, err
				}
				for _, h := range sub {
					va := l.base() + i<<sh + h.off
					b := s.banners[h.banner]
					hits = append(hits, self{c, b, va, va - b.pa})
				}
			}
			for _, h := range hits {
				if pa, _, ok := w.walk(l, c.root, c.root+h.kvo); ok && pa == c.root {
					x, err := finishARM64(w, l, c.root, h.hit, h.va, h.kvo, s.banners)
					if err != nil {
						if whyNot == nil {
							whyNot = fmt.Errorf("candidate %#x (%s): %w", c.root, l, err)
						}
						break
					}
					found = append(found, x)
					break
				}
			}
		}
		for _, x := range found {
			if x.layout == l {
				x.roots = n
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		var out []string
		var roots []uint64
		for i, f := range found {
			roots = append(roots, f.root)
			if i == 8 {
				out = append(out, fmt.Sprintf("and %d more", len(found)-i))
				continue
			}
			if i < 8 {
				out = append(out, fmt.Sprintf("%#x (%s, kimage_voffset %#x)", f.root, f.layout, f.kvo))
			}
		}
		e := deriveErr(ErrAmbiguous, "%d arm64 top-level page tables map the banner and themselves in the kernel image and pass the linear-map check: which is swapper_pg_dir is ambiguous: %s", len(found), strings.Join(out, ", "))
		e.Tables = roots
		return nil, e
	case whyNot != nil:
		return nil, whyNot
	}
	var pas []string
	e := deriveErr(ErrNoPageTable, "")
	for _, h := range s.banners {
		pas = append(pas, fmt.Sprintf("%#x (%s)", h.pa, h.release))
		e.Banners = append(e.Banners, h.pa)
	}
	e.msg = fmt.Sprintf("none of the %d candidate arm64 top-level page tables maps a banner copy (%s) in its upper half and itself at the same offset: no swapper_pg_dir", len(s.cands), strings.Join(pas, ", "))
	e.Examined, e.Err = len(s.cands), w.firstErr
	return nil, e
}

// finishARM64 checks the linear map against the banner and finds the
// image start for the chosen root.
func finishARM64(w *armWalker, l armLayout, root uint64, hit bannerHit, va, kvo uint64, banners []bannerHit) (*derivedARM64, error) {
	x := &derivedARM64{layout: l, release: hit.release, banner: hit.pa, bannerVA: va, root: root, kvo: kvo}
	for _, h := range banners {
		if h.release == hit.release {
			continue
		}
		if pa, _, ok := w.walk(l, root, h.pa+kvo); ok && pa == h.pa {
			e := deriveErr(ErrAmbiguous, "the kernel image holds banners of two releases: %q at %#x and %q at %#x", hit.release, hit.pa, h.release, h.pa)
			e.Banners = []uint64{hit.pa, h.pa}
			return nil, e
		}
	}
	// PHYS_OFFSET from the lowest linear-map address.
	top := l.entries(l.levels)
	var lva, lpa uint64
	found := false
	_, err := w.leaves(l, root, l.levels, l.base(), 0, top/2, map[uint64]bool{}, func(va, pa, size uint64) bool {
		lva, lpa, found = va, pa, true
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("linear map of %#x: %w", root, err)
	}
	if !found {
		e := deriveErr(ErrNoPageTable, "the top-level table at %#x maps nothing in the linear map (lower half): no PHYS_OFFSET", root)
		e.Tables = []uint64{root}
		return nil, e
	}
	x.physOff = lpa - (lva - l.base())
	x.linearVA = l.base() + (hit.pa - x.physOff)
	if hit.pa < x.physOff {
		e := deriveErr(ErrNoPageTable, "the banner at %#x lies below PHYS_OFFSET %#x (linear map %#x → %#x)", hit.pa, x.physOff, lva, lpa)
		e.Banners = []uint64{hit.pa}
		return nil, e
	}
	if pa, _, ok := w.walk(l, root, x.linearVA); !ok || pa != hit.pa {
		e := deriveErr(ErrNoPageTable, "linear map check: PHYS_OFFSET %#x (from %#x → %#x) puts the banner at %#x, which the table at %#x does not map to %#x", x.physOff, lva, lpa, x.linearVA, root, hit.pa)
		e.Tables, e.Banners = []uint64{root}, []uint64{hit.pa}
		return nil, e
	}
	// The image start: step down from the banner while the image maps
	// linearly at kimage_voffset.
	low := va &^ 4095
	for low > l.base() && va-low < maxArmImage {
		pa, size, ok := w.walk(l, root, low-1)
		if !ok || pa != low-1-kvo {
			break
		}
		low = (low - 1) &^ (size - 1)
	}
	x.low = low
	var head [64]byte
	if err := memory.ReadFull(w.phys, head[:], low-kvo); err == nil && bytes.Equal(head[56:60], armImageMagic) {
		x.header = true
	}
	x.kimgVaddr = kimageVaddr(l, x.release)
	return x, nil
}
