package vtop

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// BenchmarkTranslateCached measures a TLB hit.
func BenchmarkTranslateCached(b *testing.B) {
	f := newX86Fixture(b, 4, 0)
	vm := uint64(0xffffc90000000000)
	f.b.mapPage(vm, 0x12345000, 12)
	tr := f.new(b)
	benchCached(b, tr, vm)
}

// BenchmarkWalk4Level measures an uncached 4-level walk over page tables
// held in (synthetic, map-backed) physical memory.
func BenchmarkWalk4Level(b *testing.B) {
	f := newX86Fixture(b, 4, 0)
	vm := uint64(0xffffc90000000000)
	f.b.mapPage(vm, 0x12345000, 12)
	x := f.new(b).(*translator)
	benchWalk(b, x, vm)
}

// BenchmarkWalkS390X measures an uncached s390x walk of a region-third
// swapper_pg_dir down to a 4 KiB page (three table reads).
func BenchmarkWalkS390X(b *testing.B) {
	m := newPhysMem(4096)
	sb := newS390Builder(m, s390Root, s390RegionThird)
	sb.mapPage(0, 0, 20)
	sb.mapPage(0x1a00000, 0x1a00000, 20)
	vm := uint64(0x3ff00005000)
	sb.mapPage(vm, 0x12345000, 12)
	tr, err := New(Config{Arch: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, Info: s390Info(b), Phys: m})
	require.NoError(b, err)
	x := tr.(*translator)
	benchWalk(b, x, vm)
}

// ppcBenchTranslator is a radix 4 KiB ppc64le translator with vm mapped by
// a 4 KiB page (four table reads to walk).
func ppcBenchTranslator(b *testing.B, vm uint64, pages uint64) Translator {
	m := newPhysMem(4096)
	pb := newPPCBuilder(m, 12, ppcRadix4K)
	for i := range pages {
		pb.mapPage(vm+i<<12, 0x12345000+i<<12, 1)
	}
	return newPPCTranslator(b, m, ppcInfo(b, 4096, "1"))
}

// BenchmarkWalkPPC64 measures an uncached ppc64 radix walk (pgd, pud,
// pmd, pte) down to a 4 KiB page.
func BenchmarkWalkPPC64(b *testing.B) {
	vm := uint64(0xc008000000005000)
	x := ppcBenchTranslator(b, vm, 1).(*translator)
	benchWalk(b, x, vm)
}

// BenchmarkTranslateCachedPPC64 measures a TLB hit on ppc64.
func BenchmarkTranslateCachedPPC64(b *testing.B) {
	vm := uint64(0xc008000000005000)
	tr := ppcBenchTranslator(b, vm, 1)
	benchCached(b, tr, vm)
}

// BenchmarkTranslateUncachedPPC64 is BenchmarkTranslateUncached on ppc64:
// every translation walks.
func BenchmarkTranslateUncachedPPC64(b *testing.B) {
	vm := uint64(0xc008000000000000)
	const pages = 2 * tlbSize
	tr := ppcBenchTranslator(b, vm, pages)
	benchUncached(b, tr, vm, pages)
}

// BenchmarkWalkRISCV64 measures an uncached riscv64 Sv57 walk of
// swapper_pg_dir down to a 4 KiB module page (five table reads).
func BenchmarkWalkRISCV64(b *testing.B) {
	m, _ := rvFixture(b, 5)
	x := newRV(b, m, rvInfo(b, 5)).(*translator)
	benchWalk(b, x, rvModule)
}

// BenchmarkTranslateCachedRISCV64 measures a TLB hit on a riscv64 module
// page.
func BenchmarkTranslateCachedRISCV64(b *testing.B) {
	m, _ := rvFixture(b, 5)
	tr := newRV(b, m, rvInfo(b, 5))
	benchCached(b, tr, rvModule)
}

// BenchmarkTranslateUncached defeats the TLB by cycling over more pages
// than it holds: every translation walks.
func BenchmarkTranslateUncached(b *testing.B) {
	f := newX86Fixture(b, 4, 0)
	vm := uint64(0xffffc90000000000)
	const pages = 2 * tlbSize
	for i := range uint64(pages) {
		f.b.mapPage(vm+i<<12, 0x12345000+i<<12, 12)
	}
	tr := f.new(b)
	benchUncached(b, tr, vm, pages)
}

// BenchmarkReadAt reads 4 KiB of vmalloc memory page by page.
func BenchmarkReadAt(b *testing.B) {
	f := newX86Fixture(b, 4, 0)
	vm := uint64(0xffffc90000000000)
	f.b.mapPage(vm, 0x12345000, 12)
	f.m.page(0x12345)
	tr := f.new(b)
	buf := make([]byte, 4096)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.ReadAt(buf, vm); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWalkARM measures an uncached 32-bit ARM walk of swapper_pg_dir
// down to a 4 KiB module page: LPAE (three table reads) and short
// descriptors (two).
func BenchmarkWalkARM(b *testing.B) {
	for _, lpae := range []bool{true, false} {
		b.Run(map[bool]string{true: "LPAE", false: "short"}[lpae], func(b *testing.B) {
			f := newARMFixture(b, lpae, 0xC0000000, 0x40000000)
			vm := uint64(0xbf000000)
			f.mapPage(vm, 0x12345000, 12)
			x := f.new(b, true).(*translator)
			benchWalk(b, x, vm)
		})
	}
}

// BenchmarkTranslateCachedARM measures a TLB hit on 32-bit ARM (LPAE).
func BenchmarkTranslateCachedARM(b *testing.B) {
	f := newARMFixture(b, true, 0xC0000000, 0x40000000)
	vm := uint64(0xbf000000)
	f.mapPage(vm, 0x12345000, 12)
	tr := f.new(b, true)
	benchCached(b, tr, vm)
}

// benchCached measures a TLB hit: va's page translated once, then an
// address in it again and again.
func benchCached(b *testing.B, tr Translator, va uint64) {
	_, err := tr.Translate(va)
	require.NoError(b, err)
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		pa, _ := tr.Translate(va + 0x10)
		sink += pa
	}
	_ = sink
}

// benchWalk measures x's uncached page-table walk of va.
func benchWalk(b *testing.B, x *translator, va uint64) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.walk(va); err != nil {
			b.Fatal(err)
		}
	}
}

// benchUncached defeats the TLB by cycling over pages pages from va, more
// than it holds, never the slot just filled: every translation walks.
func benchUncached(b *testing.B, tr Translator, va uint64, pages uint64) {
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		if _, err := tr.Translate(va + (i%pages)<<12); err != nil {
			b.Fatal(err)
		}
		i += tlbSize + 1
	}
}
