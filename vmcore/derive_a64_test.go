package vmcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// A synthetic arm64 kernel, 48-bit VAs, 4 KiB pages, RAM from 0: the
// image at physical 2 MiB, mapped by one 2 MiB block at a KASLR-slid
// KIMAGE_VADDR; the linear map's first two 2 MiB blocks.
const (
	armText    = 0xffff800080000000 + 0x40000000 // KIMAGE_VADDR + KASLR offset
	armImage   = 0x200000
	armRoot    = 0x201000 // swapper_pg_dir
	armUpL1    = 0x202000
	armUpL2    = 0x203000
	armBanner  = 0x204000
	armLowL1   = 0x205000
	armLowL2   = 0x206000
	armTable   = 3
	armBlockAF = 1 | 1<<10 | 3<<8 // block, AF, inner shareable
)

func armIdx(va uint64, shift uint) uint64 { return va >> shift & 511 }

func synARM64() flatMem {
	m := make(flatMem, 4<<20)
	m.put(armRoot+armIdx(armText, 39)*8, armUpL1|armTable)
	m.put(armUpL1+armIdx(armText, 30)*8, armUpL2|armTable)
	m.put(armUpL2+armIdx(armText, 21)*8, armImage|armBlockAF)
	m.put(armRoot+0, armLowL1|armTable|1<<59) // PXNTable
	m.put(armLowL1+0, armLowL2|armTable)
	m.put(armLowL2+0, 0|armBlockAF)
	m.put(armLowL2+8, armImage|armBlockAF)
	copy(m[armImage+56:], "ARM\x64")
	copy(m[armBanner:], "Linux version 6.99.0-arm64 (x@y) (gcc) #1 SMP\n\x00")
	return m
}

func TestDeriveARM64(t *testing.T) {
	m := synARM64()
	x, err := deriveARM64(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, "6.99.0-arm64", x.release)
	assert.Equal(t, uint(48), x.layout.vaBits)
	assert.Equal(t, uint64(armRoot), x.root)
	assert.Equal(t, uint64(armText-armImage), x.kvo)
	assert.Equal(t, uint64(0), x.physOff)
	assert.Equal(t, uint64(armText), x.low)
	assert.True(t, x.header)
	assert.Equal(t, uint64(armText+armBanner-armImage), x.bannerVA)

	in, err := vmcoreinfo.Parse(x.vmcoreinfo())
	require.NoError(t, err)
	assert.Equal(t, "arm64", in.Arch())
	kvo, _ := in.Number("kimage_voffset")
	assert.Equal(t, x.kvo, kvo)
	sw, _ := in.Symbol("swapper_pg_dir")
	assert.Equal(t, uint64(armText+armRoot-armImage), sw)
	text, _ := in.Symbol("_text")
	assert.Equal(t, uint64(armText), text)
	off, _ := in.KernelOffset()
	assert.Equal(t, uint64(0x40000000), off)
	assert.Contains(t, x.describe(), "so swapper_pg_dir 0xffff8000c0001000")

	// Without the Image header the start is _stext, _text rounded down.
	copy(m[armImage+56:], "\x00\x00\x00\x00")
	x, err = deriveARM64(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.False(t, x.header)
	assert.Contains(t, string(x.vmcoreinfo()), fmt.Sprintf("SYMBOL(_stext)=%x\n", uint64(armText)))
}

// TestDeriveARM64Pages: the image mapped by pages, starting 64 KiB into
// the block (the head given back, as on 6.1).
func TestDeriveARM64Pages(t *testing.T) {
	m := synARM64()
	const pt = 0x300000
	m.put(armUpL2+armIdx(armText, 21)*8, pt|armTable)
	for j := uint64(16); j < 512; j++ {
		m.put(pt+j*8, (armImage+j<<12)|3|1<<10)
	}
	// The root and the banner must lie in the mapped part.
	copy(m[0x210000:0x211000], m[armRoot:armRoot+0x1000])
	clear(m[armRoot : armRoot+0x1000])
	copy(m[0x220000:0x220100], m[armBanner:armBanner+0x100])
	clear(m[armBanner : armBanner+0x100])
	x, err := deriveARM64(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x210000), x.root)
	assert.Equal(t, uint64(armText+0x10000), x.low)
	assert.False(t, x.header)
}

func TestDeriveARM64Errors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(m flatMem)
		want  DeriveError
		where []string
	}{
		{"no banner", func(m flatMem) { clear(m[armBanner : armBanner+0x100]) }, DeriveError{Kind: ErrNoBanner, Scanned: 1 << 30}, nil},
		{"no table", func(m flatMem) { m.put(armRoot, 0) }, DeriveError{Kind: ErrNoPageTable}, nil},
		{"leaf in the root", func(m flatMem) { m.put(armRoot+8, 0x400000|armBlockAF) }, DeriveError{Kind: ErrNoPageTable}, nil},
		{"table outside RAM", func(m flatMem) { m.put(armRoot+8, 0x40000000|armTable) }, DeriveError{Kind: ErrNoPageTable}, nil},
		{"root outside the image", func(m flatMem) {
			copy(m[0x100000:0x101000], m[armRoot:armRoot+0x1000])
			clear(m[armRoot : armRoot+0x1000])
		}, DeriveError{Kind: ErrNoPageTable, Banners: []uint64{armBanner}, Examined: 2}, nil},
		{"ambiguous", func(m flatMem) {
			copy(m[0x207000:0x208000], m[armRoot:armRoot+0x1000])
		}, DeriveError{Kind: ErrAmbiguous, Tables: []uint64{armRoot, 0x207000}}, nil},
		// The banner's linear-map address under PHYS_OFFSET 0 is named.
		{"linear map off", func(m flatMem) { m.put(armLowL2+8, 0x0|armBlockAF) },
			DeriveError{Kind: ErrNoPageTable, Tables: []uint64{armRoot}, Banners: []uint64{armBanner}}, []string{"PHYS_OFFSET 0x0 ", "0xffff000000204000"}},
		{"two releases", func(m flatMem) {
			copy(m[armBanner+0x800:], "Linux version 5.1.0 (x@y) (gcc) #1\n")
		}, DeriveError{Kind: ErrAmbiguous, Banners: []uint64{armBanner, armBanner + 0x800}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := synARM64()
			tc.edit(m)
			_, err := deriveARM64(m, m.ranges, 1<<30)
			checkDeriveErr(t, err, tc.want, tc.where...)
		})
	}
}

// TestDeriveARM64Loop: tables that point back up (to the root, to
// themselves) end, each read once.
func TestDeriveARM64Loop(t *testing.T) {
	m := synARM64()
	m.put(armUpL1+8, armRoot|armTable)
	m.put(armUpL2+8, armUpL2|armTable)
	m.put(armRoot+511*8, armRoot|armTable)
	x, err := deriveARM64(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, uint64(armRoot), x.root)
}

// TestDeriveARM64TableBudget: an upper half with more distinct tables
// than maxArmTables is refused.
func TestDeriveARM64TableBudget(t *testing.T) {
	t.Parallel()
	// 64 MiB of RAM: synARM64's 4 MiB, then zeros read from no buffer.
	m := zeroPadded{synARM64(), 64 << 20}
	const l1, l2 = 0x300000, 0x310000
	m.put(armRoot+300*8, l1|armTable)
	for i := uint64(0); i < 24; i++ {
		m.put(l1+i*8, (l2+i<<12)|armTable)
		for j := uint64(0); j < 512; j++ {
			m.put(l2+i<<12+j*8, (0x400000+(i*512+j)<<12)|armTable)
		}
	}
	_, err := deriveARM64(m, m.ranges, 1<<30)
	checkDeriveErr(t, err, DeriveError{Kind: ErrTooManyTables, MaxTables: maxArmTables})
}

// zeroPadded is flatMem followed by zeros up to size: RAM mostly zero
// without a buffer for it (the table budget test reads 12,288 tables'
// worth of it).
type zeroPadded struct {
	flatMem
	size uint64
}

func (m zeroPadded) ReadAt(p []byte, addr uint64) (int, error) {
	if addr >= m.size {
		return 0, memory.Fault(addr, "", "outside", memory.ErrNotSaved)
	}
	n := 0
	if addr < uint64(len(m.flatMem)) {
		n = copy(p, m.flatMem[addr:])
	}
	k := int(min(uint64(len(p)-n), m.size-addr-uint64(n)))
	clear(p[n : n+k])
	n += k
	if n < len(p) {
		return n, memory.Fault(addr+uint64(n), "", "outside", memory.ErrNotSaved)
	}
	return n, nil
}

func (m zeroPadded) ranges(yield func(start, last uint64) bool) { yield(0, m.size-1) }

// TestDeriveARM64LPA2: the 52-bit layout, a 16-entry level −1 table.
func TestDeriveARM64LPA2(t *testing.T) {
	m := make(flatMem, 4<<20)
	const text = 0xffff800080000000 + 0x22f922800000
	const l0u, l0l = 0x207000, 0x208000
	m.put(armRoot+armIdx(text, 48)&15*8, l0u|armTable)
	m.put(l0u+armIdx(text, 39)*8, armUpL1|armTable)
	m.put(armUpL1+armIdx(text, 30)*8, armUpL2|armTable)
	m.put(armUpL2+armIdx(text, 21)*8, armImage|1|1<<10)
	m.put(armRoot, l0l|armTable)
	m.put(l0l, armLowL1|armTable)
	m.put(armLowL1, armLowL2|armTable)
	m.put(armLowL2, 0x0|1|1<<10)
	m.put(armLowL2+8, armImage|1|1<<10)
	copy(m[armBanner:], "Linux version 6.12.0 (x@y) (gcc) #1\n")
	x, err := deriveARM64(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, uint(52), x.layout.vaBits)
	assert.Equal(t, uint64(text-armImage), x.kvo)
	assert.Equal(t, uint64(0xffff800080000000), x.kimgVaddr)
	assert.Contains(t, string(x.vmcoreinfo()), "NUMBER(TCR_EL1_T1SZ)=0xc\nNUMBER(kimage_voffset)=0xffffa2f9a2600000\n")
	assert.Contains(t, string(x.vmcoreinfo()), "KERNELOFFSET=22f922800000\n")
}

// FuzzDeriveARM64 runs the derivation over arbitrary physical memory: it
// must end, and a result must be self-consistent.
func FuzzDeriveARM64(f *testing.F) {
	f.Add([]byte(synARM64()[:0x207000]))
	f.Add([]byte(strings.Repeat("Linux version 1 (", 300)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4<<20 {
			return
		}
		m := flatMem(data)
		x, err := deriveARM64(m, m.ranges, 1<<30)
		if err != nil {
			return
		}
		if x.bannerVA-x.kvo != x.banner {
			t.Fatalf("banner %#x, VA %#x, kimage_voffset %#x disagree", x.banner, x.bannerVA, x.kvo)
		}
		if x.linearVA-x.layout.base()+x.physOff != x.banner {
			t.Fatalf("banner %#x, linear %#x, PHYS_OFFSET %#x disagree", x.banner, x.linearVA, x.physOff)
		}
		if _, err := vmcoreinfo.Parse(x.vmcoreinfo()); err != nil {
			t.Fatal(err)
		}
	})
}
