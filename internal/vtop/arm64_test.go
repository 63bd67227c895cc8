package vtop

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// armBuilder writes arm64 translation tables into a physMem.
type armBuilder struct {
	m          *physMem
	root       uint64
	ps, vaBits uint
	levels     int
	lpa64K     bool
	lpa2       bool
}

func (b *armBuilder) desc(pa uint64, typ uint64) uint64 {
	e := pa&armAddrMask48 | typ | 1<<10 | 1<<54 // AF, UXN: attribute bits the walk must ignore
	switch {
	case b.lpa64K:
		e = e&^(0xf<<48) | (pa>>48&0xf)<<12
	case b.lpa2:
		e = pa&0x0003ffffffffffff | typ | 1<<10 | 1<<54 | (pa>>50&3)<<8
	}
	return e
}

func (b *armBuilder) mapPage(va, pa uint64, sizeShift uint) {
	bo := binary.LittleEndian
	table := b.root
	for l := b.levels; ; l-- {
		shift := b.ps + (b.ps-3)*uint(l-1)
		bits := b.ps - 3
		if l == b.levels {
			bits = b.vaBits - shift
		}
		at := table + (va>>shift&(1<<bits-1))*8
		if shift == sizeShift {
			typ := uint64(armDescBlock)
			if l == 1 {
				typ = armDescTable
			}
			b.m.put64(bo, at, b.desc(pa, typ))
			return
		}
		e := b.m.get(bo, 8, at)
		if e&3 != 3 {
			next := b.m.alloc()
			e = b.desc(next, armDescTable)
			b.m.put64(bo, at, e)
		}
		a := arm64{pageShift: b.ps, lpa64K: b.lpa64K, lpa2: b.lpa2}
		table = a.oa(e)
	}
}

func TestARM64(t *testing.T) {
	type tc struct {
		name     string
		ps       uint
		vaBits   uint
		t1sz     uint // 0: no TCR_EL1_T1SZ line
		preFlip  bool
		highPA   bool // put a page above 2^48 (52-bit PA)
		physOff  uint64
		walkBits uint
		levels   int
	}
	cases := []tc{
		{name: "4K/39", ps: 12, vaBits: 39, t1sz: 25, physOff: 0x40000000, walkBits: 39, levels: 3},
		{name: "4K/48", ps: 12, vaBits: 48, t1sz: 16, physOff: 0xffffe82800000000, walkBits: 48, levels: 4},
		{name: "4K/48 no T1SZ", ps: 12, vaBits: 48, physOff: 0x40000000, walkBits: 48, levels: 4},
		{name: "4K/52 LPA2", ps: 12, vaBits: 52, t1sz: 12, highPA: true, physOff: 0x40000000, walkBits: 52, levels: 5},
		{name: "4K/52 on 48-bit hardware", ps: 12, vaBits: 52, t1sz: 16, physOff: 0x40000000, walkBits: 48, levels: 4},
		{name: "4K/48 pre-5.4", ps: 12, vaBits: 48, preFlip: true, physOff: 0x40000000, walkBits: 48, levels: 4},
		{name: "16K/36", ps: 14, vaBits: 36, t1sz: 28, physOff: 0x40000000, walkBits: 36, levels: 2},
		{name: "16K/47", ps: 14, vaBits: 47, t1sz: 17, physOff: 0x40000000, walkBits: 47, levels: 3},
		{name: "16K/48", ps: 14, vaBits: 48, t1sz: 16, physOff: 0x40000000, walkBits: 48, levels: 4},
		{name: "64K/42", ps: 16, vaBits: 42, t1sz: 22, physOff: 0x40000000, walkBits: 42, levels: 2},
		{name: "64K/48", ps: 16, vaBits: 48, t1sz: 16, physOff: 0x40000000, walkBits: 48, levels: 3},
		{name: "64K/52 LPA", ps: 16, vaBits: 52, t1sz: 12, highPA: true, physOff: 0x40000000, walkBits: 52, levels: 3},
		{name: "64K/52 on 48-bit hardware", ps: 16, vaBits: 52, t1sz: 16, physOff: 0x40000000, walkBits: 52, levels: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			psz := uint64(1) << c.ps
			m := newPhysMem(int(psz))
			vaMin := min(c.vaBits, 48)
			var imageVA, linearBase uint64
			if c.preFlip {
				imageVA = ^uint64(0)<<c.vaBits + 0x8000000 // VA_START + modules
				linearBase = ^uint64(0) << (c.vaBits - 1)
			} else {
				imageVA = ^uint64(0)<<(vaMin-1) + 0x8000000 // PAGE_END + modules
				linearBase = ^uint64(0) << c.vaBits
			}
			imagePA := uint64(0x40200000)
			kvo := imageVA - imagePA
			stext := imageVA + psz
			swapper := imageVA + 0x1000000
			b := &armBuilder{m: m, root: swapper - kvo, ps: c.ps, vaBits: c.walkBits, levels: c.levels,
				lpa64K: c.ps == 16 && c.vaBits == 52, lpa2: c.ps != 16 && c.walkBits == 52}
			m.page(b.root >> c.ps)
			for off := uint64(0); off < 0x1000000+psz; off += psz { // the image in pages
				b.mapPage(imageVA+off, imagePA+off, c.ps)
			}
			// A module page in vmalloc space below the image, and one with a tag.
			modVA := imageVA - 0x4000000
			modPA := uint64(0x7654) << c.ps
			if c.highPA {
				modPA |= 0x000f_0000_0000_0000 // PA bits 51:48
			}
			b.mapPage(modVA, modPA, c.ps)
			// A linear-map block at level 2 (2 MiB / 32 MiB / 512 MiB).
			blockShift := c.ps + (c.ps - 3)
			linPA := uint64(0x48000000) &^ (1<<blockShift - 1)
			// A 52-bit kernel on 48-bit hardware moves memstart_addr so that the
			// linear map starts at the 48-bit PAGE_OFFSET.
			physOff := c.physOff
			if !c.preFlip && c.t1sz != 0 && 64-c.t1sz < c.vaBits {
				start := ^uint64(0) << (64 - c.t1sz)
				physOff -= start - linearBase
				linearBase = start
			}
			linVA := linearBase + (linPA - c.physOff)
			if c.levels > 2 || blockShift <= 30 {
				b.mapPage(linVA, linPA, blockShift)
			}
			lines := []string{
				fmt.Sprintf("PAGESIZE=%d", psz),
				"SYMBOL(swapper_pg_dir)=" + hexs(swapper),
				"SYMBOL(_stext)=" + hexs(stext),
				"SYMBOL(mem_section)=" + hexs(linVA+0x380),
				fmt.Sprintf("NUMBER(VA_BITS)=%d", c.vaBits),
				fmt.Sprintf("NUMBER(kimage_voffset)=%#x", kvo),
				fmt.Sprintf("NUMBER(PHYS_OFFSET)=%#x", physOff),
				"KERNELOFFSET=0",
			}
			if c.t1sz != 0 {
				lines = append(lines, fmt.Sprintf("NUMBER(TCR_EL1_T1SZ)=%#x", c.t1sz))
			}
			tr, err := New(Config{Arch: "arm64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: int(psz)}, Info: info(t, lines...), Phys: m})
			require.NoError(t, err)
			l := tr.Layout()
			assert.Equal(t, c.levels, l.Levels)
			assert.Empty(t, l.Notes)
			assert.Len(t, l.FastPaths, 2, "image and linear fast paths")
			x := tr.(*translator)
			for _, va := range []uint64{stext + 0x10, swapper, swapper + 8, modVA + 0x123, modVA | 0xf2<<56 + 0x10, linVA + 0x380} {
				want := map[bool]uint64{true: 0}[false]
				switch {
				case va >= imageVA && va < imageVA+0x2000000:
					want = va - kvo
				case armCanon(va)&^(psz-1) == modVA:
					want = modPA + va&(psz-1)
				default:
					want = va - linVA + linPA
				}
				pa, err := tr.Translate(va)
				require.NoError(t, err, "%#x", va)
				assert.Equal(t, want, pa, "%#x", va)
				wpa, err := x.walk(armCanon(va))
				require.NoError(t, err, "walk %#x", va)
				assert.Equal(t, want, wpa, "walk %#x", va)
			}
			// A hole, and a user address.
			_, err = tr.Translate(modVA + 16*psz)
			assert.ErrorIs(t, err, ErrNotMapped)
			walkFault(t, err, modVA+16*psz, "pte")
			_, err = tr.Translate(0x0000_7fff_0000_0000)
			assert.ErrorIs(t, err, ErrNotMapped)
			errshape.Require(t, err, "0x7fff00000000")
			var fe *memory.FaultError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, uint64(0x0000_7fff_0000_0000), fe.Addr)
		})
	}
}

// TestARM64ImageHead checks where the kernel-image fast path starts: at
// _text when the page tables map the image head [_text, _stext) at
// kimage_voffset (6.12), at _stext when they do not (6.1) or when the
// entries are not in the dump, with _text from SYMBOL(_text), from
// MODULES_END + KERNELOFFSET, or _stext rounded down to 2 MiB.
func TestARM64ImageHead(t *testing.T) {
	const (
		ps         = 12
		modulesEnd = 0xffff800008000000
		kaslr      = 0x3e743da00000
		imagePA    = 0x40200000
	)
	text := uint64(modulesEnd + kaslr)
	stext := text + 0x10000
	swapper := text + 0x1000000
	kvo := text - imagePA
	cases := []struct {
		name      string
		mapHead   bool
		dropTable bool // the head's pte table is not in the dump
		lines     []string
		start     uint64
		note      string
	}{
		{name: "MODULES_END+KERNELOFFSET", mapHead: true, lines: []string{"NUMBER(MODULES_END)=0xffff800008000000", "KERNELOFFSET=3e743da00000"}, start: text},
		{name: "SYMBOL(_text)", mapHead: true, lines: []string{"SYMBOL(_text)=" + hexs(text)}, start: text},
		{name: "_stext rounded down", mapHead: true, start: text},
		{name: "head not mapped", lines: []string{"NUMBER(MODULES_END)=0xffff800008000000", "KERNELOFFSET=3e743da00000"}, start: stext, note: "not mapped"},
		{name: "head tables not saved", mapHead: true, dropTable: true, start: stext, note: "not present in dump"},
		{name: "KERNELOFFSET off by 2 MiB", mapHead: true, lines: []string{"NUMBER(MODULES_END)=0xffff800008000000", "KERNELOFFSET=3e743d800000"}, start: stext},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newPhysMem(1 << ps)
			b := &armBuilder{m: m, root: swapper - kvo, ps: ps, vaBits: 48, levels: 4}
			m.page(b.root >> ps)
			first := stext
			if c.mapHead {
				first = text
			}
			for va := first; va < swapper+0x1000; va += 1 << ps {
				b.mapPage(va, va-kvo, ps)
			}
			if c.dropTable {
				// The pte table of the image's first 2 MiB: the one
				// entry of the pmd that maps text.
				pte := (&arm64{pageShift: ps}).oa(walkTable(t, m, b, text))
				delete(m.pages, pte>>ps)
			}
			lines := append([]string{
				"PAGESIZE=4096",
				"SYMBOL(swapper_pg_dir)=" + hexs(swapper),
				"SYMBOL(_stext)=" + hexs(stext),
				"NUMBER(VA_BITS)=48",
				fmt.Sprintf("NUMBER(kimage_voffset)=%#x", kvo),
				"NUMBER(PHYS_OFFSET)=0x40000000",
			}, c.lines...)
			tr, err := New(Config{Arch: "arm64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: info(t, lines...), Phys: m})
			require.NoError(t, err)
			l := tr.Layout()
			require.NotEmpty(t, l.FastPaths)
			assert.Equal(t, c.start, l.FastPaths[0].Start)
			assert.Equal(t, swapper|0xfff, l.FastPaths[0].Last)
			if c.note == "" {
				assert.Empty(t, l.Notes)
			} else if assert.Len(t, l.Notes, 1) {
				assert.Contains(t, l.Notes[0], "image head")
				assert.Contains(t, l.Notes[0], c.note)
			}
			pa, err := tr.Translate(text + 0x38)
			if c.mapHead && !c.dropTable {
				require.NoError(t, err)
				assert.Equal(t, uint64(imagePA+0x38), pa)
			} else if c.mapHead {
				assert.ErrorIs(t, err, memory.ErrNotSaved)
			} else {
				assert.ErrorIs(t, err, ErrNotMapped)
			}
		})
	}
}

// walkTable returns the pmd entry on the way to va (the descriptor of the
// pte table) in b's 4-level, 4K tables.
func walkTable(t *testing.T, m *physMem, b *armBuilder, va uint64) uint64 {
	t.Helper()
	a := &arm64{pageShift: b.ps}
	table := b.root
	for l := b.levels; l > 1; l-- {
		shift := b.ps + (b.ps-3)*uint(l-1)
		e := m.get(binary.LittleEndian, 8, table+(va>>shift&511)*8)
		require.Equal(t, uint64(armDescTable), e&3, "level %d", l)
		if l == 2 {
			return e
		}
		table = a.oa(e)
	}
	panic("unreachable")
}
