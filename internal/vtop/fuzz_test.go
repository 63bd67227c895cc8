package vtop

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// FuzzWalk feeds random page-table pages to the walkers: data is cut into
// 4 KiB pages placed at consecutive pfns from 0x100 (the first holds the
// x86_64 top-level table, the i386 swapper_pg_dir, arm64's root, the first
// of the four of s390x's swapper_pg_dir, the first of ppc64's radix
// swapper_pg_dir, 32-bit ARM's swapper_pg_dir, LPAE with flags&8, and
// riscv64's root), and
// every architecture translates and reads va. Nothing may panic, every
// failure must be a *memory.FaultError carrying va, and a success must be
// reproducible through the TLB. Mapped lists the 16 MiB around va (see
// fuzzMapped).
//
// The pages are edits (testutil.FuzzPatch) to a base picked by mode, or
// with fuzzRaw in mode the input itself (up to 1 KiB): taken whole, the
// 16 KiB seeds made every input that added coverage stall fuzzing for the
// whole -fuzzminimizetime (about 380 execs/s).
func FuzzWalk(f *testing.F) {
	const (
		fuzzRaw      = 0x80
		fuzzMaxEdits = 128
		fuzzMaxRaw   = 1 << 10
	)
	// Bases: a synthetic x86_64 fixture's tables (also padded to the eight
	// pages a 5-level chain and a data page need), its top page alone, and
	// a page of entries that all point back at it.
	m := newPhysMem(4096)
	b := newX86Builder(m, 0x100000, 4)
	b.mapPage(0xffffc90000001000, 0x102000, 12)
	b.mapPage(0xffff888000000000, 0, 30)
	b.mapPage(0xffffffffc0000000, 0x200000, 21)
	var seed []byte
	for pfn := uint64(0x100); m.pages[pfn] != nil; pfn++ {
		seed = append(seed, m.pages[pfn]...)
	}
	loop := make([]byte, 4096)
	for i := 0; i < 4096; i += 8 {
		binary.LittleEndian.PutUint64(loop[i:], 0x100000|3|x86PSE)
	}
	padded := append(append([]byte(nil), seed...), make([]byte, 8<<12-len(seed))...)
	// An s390x region-third swapper_pg_dir at 0x100000 (four pages) with a
	// 4 KiB page, a 1 MiB segment and a 2 GiB frame below it.
	sm := newPhysMem(4096)
	sb := newS390Builder(sm, 0x100000, s390RegionThird)
	sb.mapPage(0x3ff00001000, 0x102000, 12)
	sb.mapPage(0x3ff00100000, 0x200000, 20)
	sb.mapPage(0x3ff80000000, 0x80000000, 31)
	var s390seed []byte
	for pfn := uint64(0x100); sm.pages[pfn] != nil; pfn++ {
		s390seed = append(s390seed, sm.pages[pfn]...)
	}
	// A ppc64 radix 4 KiB swapper_pg_dir at 0x100000 (its first page: the
	// vmalloc index) with a page, a 2 MiB and a 1 GiB leaf below it.
	pm := newPhysMem(4096)
	pb := newPPCBuilderAt(pm, 0x100000, 12, ppcRadix4K)
	pb.next = 0x101000
	pb.mapPage(0xc008000000001000, 0x102000, 1)
	pb.mapPage(0xc008000000200000, 0x200000, 2)
	pb.mapPage(0xc008000040000000, 0x40000000, 3)
	var ppcSeed []byte
	for pfn := uint64(0x100); pm.pages[pfn] != nil; pfn++ {
		ppcSeed = append(ppcSeed, pm.pages[pfn]...)
	}
	// 32-bit ARM swapper_pg_dirs at 0x100000 (PAGE_OFFSET 0xc0000000,
	// PHYS_OFFSET 0): short descriptors (four pages) and LPAE (a page of
	// four entries, then their pmd tables), each with a module page and a
	// section or block.
	armSeed := func(lpae bool) []byte {
		am := newPhysMem(4096)
		for pfn := range uint64(map[bool]uint64{false: 4, true: 5}[lpae]) {
			am.page(0x100 + pfn)
		}
		af := &armFixture{m: am, lpae: lpae, po: 0xc0000000, swapper: 0xc0100000, root: 0x100000}
		if lpae {
			for i := range uint64(4) {
				am.put64(binary.LittleEndian, af.root+i*8, (af.root+0x1000*(i+1))|3)
			}
		}
		af.mapPage(0xbf000000, 0x102000, 12)
		af.mapPage(0xc0000000, 0, map[bool]uint{false: 20, true: 21}[lpae])
		var out []byte
		for pfn := uint64(0x100); am.pages[pfn] != nil; pfn++ {
			out = append(out, am.pages[pfn]...)
		}
		return out
	}
	// A riscv64 Sv39 swapper_pg_dir at 0x100000 with a 4 KiB page, a
	// 2 MiB and a 1 GiB one (flags 0x40 picks Sv39).
	rm := newPhysMem(4096)
	rb := &rvBuilder{m: rm, root: 0x100000, levels: 3}
	rm.page(0x100)
	rb.mapPage(0xffffffff7f001000, 0x102000, 12, rvRead|rvExec)
	rb.mapPage(0xffffffff80000000, 0x200000, 21, rvRead|rvWrite|rvExec)
	rb.mapPage(0xffffffd600000000, 0x80000000, 30, rvRead|rvWrite)
	var rvseed []byte
	for pfn := uint64(0x100); rm.pages[pfn] != nil; pfn++ {
		rvseed = append(rvseed, rm.pages[pfn]...)
	}
	bases := [][]byte{seed, padded, seed[:4096], loop, s390seed, ppcSeed, armSeed(false), armSeed(true), rvseed}
	f.Add(uint8(0), []byte(nil), uint64(0xffffc90000001234), uint8(0))
	f.Add(uint8(0), []byte(nil), uint64(0xffff888000012345), uint8(0x10))
	f.Add(uint8(1), []byte(nil), uint64(0xffffc90000001234), uint8(1))
	f.Add(uint8(2), []byte(nil), uint64(0xffffffffc0000000), uint8(0x21))
	f.Add(uint8(3), []byte(nil), uint64(0xffffffffffffffff), uint8(0x3))
	f.Add(uint8(fuzzRaw), []byte{}, uint64(0), uint8(0xff))
	f.Add(uint8(4), []byte(nil), uint64(0x3ff00001234), uint8(0))
	f.Add(uint8(4), []byte(nil), uint64(0x3ff80123456), uint8(0))
	f.Add(uint8(5), []byte(nil), uint64(0xc008000000001234), uint8(0))
	f.Add(uint8(5), []byte(nil), uint64(0xc008000040123456), uint8(0x40))
	f.Add(uint8(6), []byte(nil), uint64(0xbf000123), uint8(0))
	f.Add(uint8(7), []byte(nil), uint64(0xbf000123), uint8(8))
	f.Add(uint8(7), []byte(nil), uint64(0xc0012345), uint8(8))
	f.Add(uint8(8), []byte(nil), uint64(0xffffffff7f001234), uint8(0x40))
	f.Add(uint8(8), []byte(nil), uint64(0xffffffd600123456), uint8(0x40))
	f.Add(uint8(8), []byte(nil), uint64(0xffffffff80123456), uint8(0xc0))

	f.Fuzz(func(t *testing.T, mode uint8, data []byte, va uint64, flags uint8) {
		if mode&fuzzRaw != 0 {
			data = data[:min(len(data), fuzzMaxRaw)]
		} else {
			data = testutil.FuzzPatch(bases[int(mode)%len(bases)], data[:min(len(data), fuzzMaxEdits)])
		}
		fuzzWalk(t, data, va, flags)
	})
}

func fuzzWalk(t *testing.T, data []byte, va uint64, flags uint8) {
	if len(data) > 8<<12 { // eight pages hold a 5-level chain and a data page; larger inputs only slow minimization
		return
	}
	m := newPhysMem(4096)
	for i := 0; len(data) > 0; i++ {
		n := copy(m.page(0x100+uint64(i)), data)
		data = data[n:]
	}
	m.page(0x100)
	levels := 4
	if flags&1 != 0 {
		levels = 5
	}
	sme := uint64(0)
	if flags&2 != 0 {
		sme = 1 << 47
	}
	var x86info, i386info, armInfo *vmcoreinfo.Info
	x86info, _ = vmcoreinfo.Parse([]byte("OSRELEASE=f\nSYMBOL(init_top_pgt)=ffffffff80100000\nNUMBER(phys_base)=0\n" +
		map[bool]string{true: "NUMBER(pgtable_l5_enabled)=1\n"}[levels == 5] +
		map[bool]string{true: "NUMBER(sme_mask)=140737488355328\n"}[sme != 0]))
	i386lines := "OSRELEASE=f\nSYMBOL(swapper_pg_dir)=c0100000\n"
	if flags&4 != 0 {
		i386lines += "CONFIG_X86_PAE=y\n"
	}
	i386info, _ = vmcoreinfo.Parse([]byte(i386lines))
	vaBits := []string{"39", "48", "52", "47"}[flags>>4&3]
	armInfo, _ = vmcoreinfo.Parse([]byte("OSRELEASE=f\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffff800000100000\nNUMBER(kimage_voffset)=0xffff800000000000\nNUMBER(PHYS_OFFSET)=0x40000000\nNUMBER(VA_BITS)=" + vaBits + "\n"))
	armLines := "OSRELEASE=f\nSYMBOL(swapper_pg_dir)=c0100000\n"
	if flags&8 != 0 {
		armLines += "CONFIG_ARM_LPAE=y\n"
	}
	arm32info, _ := vmcoreinfo.Parse([]byte(armLines))
	s390info, _ := vmcoreinfo.Parse([]byte("OSRELEASE=f\nSYMBOL(_stext)=100000\nSYMBOL(swapper_pg_dir)=100000\nKERNELOFFSET=0\n"))
	// ppc64: flags 0x40 picks 64 KiB pages, 0x80 the hash geometry.
	ppcInfo, _ := vmcoreinfo.Parse([]byte("OSRELEASE=f\nSYMBOL(_stext)=c000000000000000\nSYMBOL(swapper_pg_dir)=c000000000100000\n" +
		map[bool]string{false: "PAGESIZE=4096\n", true: "PAGESIZE=65536\n"}[flags&0x40 != 0] +
		map[bool]string{false: "NUMBER(RADIX_MMU)=1\n", true: "NUMBER(RADIX_MMU)=0\n"}[flags&0x80 != 0]))
	// riscv64: swapper_pg_dir at physical 0x100000 through the image
	// mapping; Sv39, Sv48 or Sv57 from flags bits 6-7 (3: VA_BITS the
	// walk refuses).
	rvBits := []string{"48", "39", "57", "40"}[flags>>6&3]
	rvinfo, _ := vmcoreinfo.Parse([]byte("OSRELEASE=f\nSYMBOL(swapper_pg_dir)=ffffffff80100000\nSYMBOL(_stext)=ffffffff80002000\n" +
		"NUMBER(va_kernel_pa_offset)=0xffffffff80000000\nNUMBER(phys_ram_base)=0\nNUMBER(PAGE_OFFSET)=0xffffffd600000000\nNUMBER(VA_BITS)=" + rvBits + "\n"))
	for _, cfg := range []Config{
		{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390info, Phys: m},
		{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: x86info, Phys: m},
		{Arch: "i386", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, Info: i386info, Phys: m},
		{Arch: "arm64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}, Info: armInfo, Phys: m},
		{Arch: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: ppcInfo, Phys: m},
		{Arch: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, Info: arm32info, Phys: m},
		{Arch: "riscv64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: rvinfo, Phys: m},
	} {
		tr, err := New(cfg)
		if err != nil {
			if tr != nil {
				t.Fatalf("%s: error %v with a translator", cfg.Arch, err)
			}
			continue
		}
		check := func(err error) {
			var fe *memory.FaultError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: %#x: error %v (%T) is not a FaultError", cfg.Arch, va, err, err)
			}
		}
		pa, err := tr.Translate(va)
		if err != nil {
			check(err)
		} else if pa2, err2 := tr.Translate(va); err2 != nil || pa2 != pa {
			t.Fatalf("%s: %#x: TLB gives %#x, %v; walk gave %#x", cfg.Arch, va, pa2, err2, pa)
		}
		var buf [64]byte
		if n, err := tr.ReadAt(buf[:], va); n < len(buf) {
			check(err)
		}
		// A read of several pages (read as runs of contiguous physical
		// pages) gives what page-sized reads give.
		many, paged := make([]byte, 5*4096+100), make([]byte, 5*4096+100)
		n, err := tr.ReadAt(many, va)
		pn := 0
		var perr error
		for pn < len(paged) && perr == nil {
			a := va + uint64(pn)
			m, e := tr.ReadAt(paged[pn:min(len(paged), pn+int(4096-a%4096))], a)
			pn, perr = pn+m, e
		}
		if n != pn || (err == nil) != (perr == nil) || !bytes.Equal(many[:n], paged[:pn]) {
			t.Fatalf("%s: %#x: read of many pages %d, %v; page by page %d, %v", cfg.Arch, va, n, err, pn, perr)
		}
		if x := tr.(*translator); x.walk != nil {
			if _, err := x.walk(va); err != nil {
				check(err)
			}
		}
		fuzzMapped(t, cfg.Arch, tr, va)
		_ = tr.Describe()
	}
}

// fuzzMapped lists the mapped runs of the 16 MiB window around va: they
// must be non-empty, in increasing order, apart (neighbours are merged)
// and inside the window, and stopping after the first must end the walk.
// On s390x, ppc64 and riscv64 (canonical windows), whose walk and
// enumeration check the same entry bits (and table lengths and
// address-space size), the first and last byte of every run must translate
// through the walk and the byte after it must not.
func fuzzMapped(t *testing.T, arch string, tr Translator, va uint64) {
	m, ok := tr.(Mapper)
	if !ok {
		return
	}
	const window = 1 << 24
	lo := va &^ (window - 1)
	hi := lo + window
	if hi == 0 {
		hi = ^uint64(0)
	}
	var runs [][2]uint64
	err := m.Mapped(lo, hi, func(s, e uint64) bool {
		runs = append(runs, [2]uint64{s, e})
		return true
	})
	if err != nil {
		if len(runs) > 0 {
			t.Fatalf("%s: Mapped error %v after %d runs", arch, err, len(runs))
		}
		return
	}
	for i, r := range runs {
		if r[0] < lo || r[1] > hi || r[0] >= r[1] || i > 0 && r[0] <= runs[i-1][1] {
			t.Fatalf("%s: [%#x, %#x): run %d [%#x, %#x) out of order or range (previous %v)", arch, lo, hi, i, r[0], r[1], runs[max(i-1, 0)])
		}
	}
	n := 0
	_ = m.Mapped(lo, hi, func(s, e uint64) bool { n++; return false })
	if n > 1 {
		t.Fatalf("%s: Mapped went on after yield returned false (%d calls)", arch, n)
	}
	x := tr.(*translator)
	if x.walk == nil {
		return
	}
	switch arch {
	case "s390x", "ppc64le":
	case "riscv64":
		// The same entry rules; the window is canonical with va.
		bits := 12 + 9*uint(x.layout.Levels)
		if top := int64(va) >> (bits - 1); top != 0 && top != -1 {
			return
		}
	default:
		return
	}
	for _, r := range runs {
		for _, a := range []uint64{r[0], r[1] - 1} {
			if _, err := x.walk(a); err != nil {
				t.Fatalf("%s: %#x in mapped run [%#x, %#x) does not walk: %v", arch, a, r[0], r[1], err)
			}
		}
		if r[1] < hi {
			if pa, err := x.walk(r[1]); err == nil {
				t.Fatalf("%s: %#x after mapped run [%#x, %#x) walks to %#x", arch, r[1], r[0], r[1], pa)
			}
		}
	}
}
