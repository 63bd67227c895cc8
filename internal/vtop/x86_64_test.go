package vtop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// x86Fixture is a small x86_64 kernel: image at _stext = 0xffffffff97200000
// (KERNELOFFSET 0x16200000), phys_base −0xf800000 (as on Debian 6.1), so the
// image's physical start is 0x7a00000; the top-level table inside the image.
type x86Fixture struct {
	m        *physMem
	b        *x86Builder
	in       *vmcoreinfo.Info
	rootVA   uint64
	physBase uint64
	pob      uint64
}

const (
	fxStext  = 0xffffffff97200000
	fxRootVA = 0xffffffff98e0a000
	fxPOB    = 0xffff8e4180000000 // page_offset_base
)

var fxPhysBase = uint64(0xfffffffff0800000) // −0xf800000 (a variable: the arithmetic wraps)

func newX86Fixture(t testing.TB, levels int, sme uint64, extra ...string) *x86Fixture {
	m := newPhysMem(4096)
	rootPA := fxRootVA - startKernelMap + fxPhysBase
	b := newX86Builder(m, rootPA, levels)
	b.sme = sme
	pob := uint64(fxPOB)
	if levels == 5 {
		pob = 0xff11234540000000
	}
	// Kernel image: 2 MiB pages over 64 MiB from _stext.
	for off := uint64(0); off < 64<<20; off += 2 << 20 {
		b.mapPage(fxStext+off, fxStext-startKernelMap+fxPhysBase+off, 21)
	}
	// Direct map: physical 0..1 GiB by a 1 GiB page, 1..1.5 GiB by 2 MiB pages.
	b.mapPage(pob, 0, 30)
	for off := uint64(1 << 30); off < 3<<29; off += 2 << 20 {
		b.mapPage(pob+off, off, 21)
	}
	lines := []string{
		"SYMBOL(_stext)=" + hexs(fxStext),
		"SYMBOL(init_top_pgt)=" + hexs(fxRootVA),
		"SYMBOL(swapper_pg_dir)=" + hexs(fxRootVA),
		"NUMBER(phys_base)=" + fmt.Sprint(int64(fxPhysBase)),
		"KERNELOFFSET=16200000",
		"NUMBER(KERNEL_IMAGE_SIZE)=1073741824",
		fmt.Sprintf("NUMBER(pgtable_l5_enabled)=%d", map[bool]int{true: 1}[levels == 5]),
		fmt.Sprintf("NUMBER(sme_mask)=%d", sme),
	}
	lines = append(lines, extra...)
	return &x86Fixture{m: m, b: b, in: info(t, lines...), rootVA: fxRootVA, physBase: fxPhysBase, pob: pob}
}

func (f *x86Fixture) new(t testing.TB) Translator {
	t.Helper()
	tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}, Info: f.in, Phys: f.m})
	require.NoError(t, err)
	return tr
}

func TestX86_64Translate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		levels int
		sme    uint64
	}{
		{"4-level", 4, 0},
		{"5-level", 5, 0},
		{"4-level SME", 4, 1 << 47},
		{"5-level SME", 5, 1 << 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newX86Fixture(t, tc.levels, tc.sme)
			vmalloc := uint64(0xffffc90000000000)
			modules := uint64(0xffffffffc0a00000)
			if tc.levels == 5 {
				vmalloc = 0xffa0000000000000
			}
			f.b.mapPage(vmalloc+0x5000, 0x12345000, 12)
			f.b.mapPage(modules, 0x23456000, 12)
			f.b.mapPage(modules+0x1000, 0x00777000, 12)
			tr := f.new(t)

			l := tr.Layout()
			assert.Equal(t, tc.levels, l.Levels)
			assert.Equal(t, fxPhysBase, l.PhysBase)
			assert.Equal(t, f.pob, l.DirectMap, "page_offset_base from the walk")
			assert.Equal(t, uint64(0x16200000), l.KernelOffset)

			for _, c := range []struct {
				va, pa uint64
			}{
				{fxStext, 0x7a00000},
				{fxStext + 0x123456, 0x7a00000 + 0x123456},
				{fxRootVA, fxRootVA - startKernelMap + fxPhysBase},
				{f.pob, 0},
				{f.pob + 0x3fffffff, 0x3fffffff},
				{f.pob + 0x40123456, 0x40123456},
				{vmalloc + 0x5abc, 0x12345abc},
				{modules + 0x10, 0x23456010},
				{modules + 0x1fff, 0x777fff},
			} {
				pa, err := tr.Translate(c.va)
				require.NoError(t, err, "%#x", c.va)
				assert.Equal(t, c.pa, pa, "%#x", c.va)
			}
			// The walk agrees with both fast paths wherever they overlap.
			x := tr.(*translator)
			for _, va := range []uint64{fxStext + 0x1234, f.pob + 0x40000000 + 0x5678, f.pob + 0x1000} {
				want, err := x.translateSlow(va)
				require.NoError(t, err)
				got, err := x.walk(va)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%#x", va)
			}
		})
	}
}

func TestX86_64Faults(t *testing.T) {
	f := newX86Fixture(t, 4, 0)
	vm := uint64(0xffffc90000000000)
	f.b.mapPage(vm, 0x12345000, 12)
	tr := f.new(t)

	// Non-present PTE next to a present one.
	_, err := tr.Translate(vm + 0x1000)
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, vm+0x1000, fe.Addr)
	assert.Equal(t, memory.SpaceKernelVirtual, fe.Space)
	ee := walkFault(t, err, vm+0x1000, "pte")
	assert.True(t, ee.Read)
	assert.Equal(t, "not present", ee.What)
	assert.ErrorIs(t, err, ErrNotMapped)

	// Non-present PMD (a different 2 MiB region).
	_, err = tr.Translate(vm + 4<<20)
	walkFault(t, err, vm+4<<20, "pmd")
	assert.ErrorIs(t, err, ErrNotMapped)

	// Non-present PGD.
	_, err = tr.Translate(0xffffd00000000000)
	walkFault(t, err, 0xffffd00000000000, "pgd")

	// Non-canonical.
	_, err = tr.Translate(0x8000000000000000)
	require.ErrorIs(t, err, ErrNotMapped)
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, uint64(0x8000000000000000), fe.Addr)
	assert.NotErrorAs(t, err, new(*EntryError), "refused before the walk")
	errshape.Require(t, err)

	// A PUD entry pointing outside the dump.
	pgdAt := f.b.root + (uint64(0xffffe00000000000)>>39&511)*8
	f.m.put64(binary.LittleEndian, pgdAt, 0x7fff0000000|x86Present)
	_, err = tr.Translate(0xffffe00000000000)
	ee = walkFault(t, err, 0xffffe00000000000, "pud")
	assert.Equal(t, uint64(0x7fff0000000), ee.Addr)
	assert.False(t, ee.Read)
	assert.ErrorIs(t, err, memory.ErrNotSaved)

	// A loop: a PGD entry pointing at the PGD itself ends after 4 levels.
	loopVA := uint64(0xffff_f000_0000_0000)
	f.m.put64(binary.LittleEndian, f.b.root+(loopVA>>39&511)*8, f.b.root|x86Present)
	_, err = tr.Translate(loopVA)
	require.Error(t, err)
	errshape.Require(t, err)

	// A read of a page whose data is missing faults at the virtual address.
	f.b.mapPage(vm+0x2000, 0x7ff000000, 12)
	var buf [16]byte
	n, err := tr.ReadAt(buf[:], vm+0x2ff8)
	assert.Equal(t, 0, n)
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, vm+0x2ff8, fe.Addr)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
}

func TestX86_64ReadAtSpansPages(t *testing.T) {
	f := newX86Fixture(t, 4, 0)
	vm := uint64(0xffffc90000100000)
	f.b.mapPage(vm, 0x50000000+0x3000, 12)
	f.b.mapPage(vm+0x1000, 0x50000000+0x1000, 12) // physically before
	f.m.write(0x50003ff0, []byte("hello, page one|"))
	f.m.write(0x50001000, []byte("and page two"))
	f.b.mapPage(vm+0x2000, 0x60000000, 12) // data page absent from the dump
	delete(f.m.pages, 0x60000)
	tr := f.new(t)
	buf := make([]byte, 28)
	require.NoError(t, memory.ReadFull(tr, buf, vm+0xff0))
	assert.Equal(t, "hello, page one|and page two", string(buf))
	// Read across into the unsaved page: short, with the fault's virtual address.
	buf = make([]byte, 0x1010)
	n, err := tr.ReadAt(buf, vm+0x1000)
	assert.Equal(t, 0x1000, n)
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, vm+0x2000, fe.Addr)
	s := tr.Stats()
	assert.NotZero(t, s.Walks)
}

func TestX86_64TLB(t *testing.T) {
	f := newX86Fixture(t, 4, 0)
	vm := uint64(0xffffc90000000000)
	f.b.mapPage(vm, 0x12345000, 12)
	tr := f.new(t)
	for i := range 10 {
		pa, err := tr.Translate(vm + uint64(i))
		require.NoError(t, err)
		assert.Equal(t, 0x12345000+uint64(i), pa)
	}
	s := tr.Stats()
	assert.Equal(t, uint64(1), s.Walks)
	assert.Equal(t, uint64(9), s.TLBHits)
	// A colliding page evicts and re-walks, giving the right answer.
	f.b.mapPage(vm+tlbSize*0x1000, 0x22222000, 12)
	pa, err := tr.Translate(vm + tlbSize*0x1000)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x22222000), pa)
	pa, err = tr.Translate(vm + 8)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x12345008), pa)
	assert.Equal(t, uint64(3), tr.Stats().Walks)
}

func TestX86_64PhysBase(t *testing.T) {
	t.Run("derived", func(t *testing.T) {
		f := newX86Fixture(t, 4, 0)
		// Drop NUMBER(phys_base): the search must find −0xf800000; the walk
		// needs the root mapped by itself, which the image mapping does.
		in := info(t, "SYMBOL(init_top_pgt)="+hexs(fxRootVA), "KERNELOFFSET=16200000")
		tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: f.m})
		require.NoError(t, err)
		l := tr.Layout()
		assert.Equal(t, fxPhysBase, l.PhysBase)
		assert.Equal(t, "page-table search", l.PhysBaseSource)
		pa, err := tr.Translate(fxStext)
		require.NoError(t, err)
		assert.Equal(t, uint64(0x7a00000), pa)
	})
	t.Run("config", func(t *testing.T) {
		f := newX86Fixture(t, 4, 0)
		in := info(t, "SYMBOL(init_top_pgt)="+hexs(fxRootVA))
		pb := fxPhysBase
		tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: f.m, PhysBase: &pb})
		require.NoError(t, err)
		assert.Equal(t, "Config.PhysBase", tr.Layout().PhysBaseSource)
	})
	t.Run("missing", func(t *testing.T) {
		in := info(t, "KERNELOFFSET=0")
		_, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: newPhysMem(4096)})
		require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	})
	t.Run("positive without root", func(t *testing.T) {
		in := info(t, "NUMBER(phys_base)=16777216")
		tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: newPhysMem(4096)})
		require.NoError(t, err)
		pa, err := tr.Translate(0xffffffff81000000)
		require.NoError(t, err)
		assert.Equal(t, uint64(0x2000000), pa)
		_, err = tr.Translate(0xffffc90000000000)
		require.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
		assert.Contains(t, tr.Describe(), "page-table walk: off")
	})
}

func TestNewErrors(t *testing.T) {
	for _, arch := range []string{"ppc", "riscv32", "mips"} {
		_, err := New(Config{Arch: arch, Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: newPhysMem(4096)})
		assert.ErrorIs(t, err, errors.ErrUnsupported, arch)
	}
	_, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Phys: newPhysMem(4096)})
	assert.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	// The top-level table is not in the dump.
	in := info(t, "NUMBER(phys_base)=0", "SYMBOL(init_top_pgt)=ffffffff82000000")
	_, err = New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: newPhysMem(4096)})
	assert.ErrorIs(t, err, memory.ErrNotSaved)
}

func TestVirtualFallbackAndVerify(t *testing.T) {
	f := newX86Fixture(t, 4, 0)
	vm := uint64(0xffffc90000000000)
	f.b.mapPage(vm, 0x12345000, 12)
	f.m.write(0x12345000, []byte("walked"))
	// The dump's own virtual map: the same page, plus one the tables lack.
	virt := memory.ReaderFunc(func(p []byte, addr uint64) (int, error) {
		switch {
		case addr >= vm && addr+uint64(len(p)) <= vm+0x1000:
			return f.m.ReadAt(p, 0x12345000+addr-vm)
		case addr >= vm+0x1000 && addr+uint64(len(p)) <= vm+0x2000:
			return copy(p, "virtual!"), nil
		}
		return 0, memory.Fault(addr, "virtual", "", memory.ErrNotSaved)
	})
	tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: f.in, Phys: f.m, Virtual: virt})
	require.NoError(t, err)
	buf := make([]byte, 8)
	require.NoError(t, memory.ReadFull(tr, buf, vm+0x1000))
	assert.Equal(t, "virtual!", string(buf))
	assert.Equal(t, uint64(1), tr.Stats().VirtualReads)
	n, err := Verify(tr, virt, 6, vm, vm+0x1000, fxStext)
	require.NoError(t, err)
	assert.Equal(t, 2, n) // fxStext is not in virt
	f.m.write(0x12345000, []byte("WALKED"))
	bad := memory.ReaderFunc(func(p []byte, addr uint64) (int, error) { return copy(p, "walked"), nil })
	_, err = Verify(tr, bad, 6, vm)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
}

// TestReadAtCoalesces checks that pages contiguous in physical memory are
// read with one physical read of at most maxRun bytes, and that a read
// stopping inside such a run faults at the right virtual address.
func TestReadAtCoalesces(t *testing.T) {
	f := newX86Fixture(t, 4, 0)
	vm := uint64(0xffffc90000400000)
	const pages = 100
	for i := range uint64(pages) {
		pa := 0x70000000 + i*0x1000
		if i == 70 {
			pa = 0x71000000 // not contiguous with its neighbours
		}
		f.b.mapPage(vm+i*0x1000, pa, 12)
		f.m.write(pa, binary.LittleEndian.AppendUint64(nil, 0xabc000+i))
	}
	delete(f.m.pages, (0x70000000+90*0x1000)>>12) // page 90's data is not in the dump
	var sizes []int
	tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}, Info: f.in,
		Phys: memory.ReaderFunc(func(p []byte, addr uint64) (int, error) {
			if len(p) > 8 { // not a page-table entry
				sizes = append(sizes, len(p))
			}
			return f.m.ReadAt(p, addr)
		})})
	require.NoError(t, err)
	sizes = nil // New reads a few pages of its own
	buf := make([]byte, 80*0x1000)
	n, err := tr.ReadAt(buf, vm)
	require.NoError(t, err)
	require.Equal(t, len(buf), n)
	for i := range uint64(80) {
		require.Equal(t, 0xabc000+i, binary.LittleEndian.Uint64(buf[i*0x1000:]), "page %d", i)
	}
	assert.Equal(t, []int{maxRun, 70*0x1000 - maxRun, 0x1000, 9 * 0x1000}, sizes)

	// A read into page 90 stops there.
	buf = make([]byte, 20*0x1000)
	n, err = tr.ReadAt(buf, vm+80*0x1000+8)
	assert.Equal(t, 10*0x1000-8, n)
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, vm+90*0x1000, fe.Addr)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
}

// TestIssue13ImageSize: without NUMBER(KERNEL_IMAGE_SIZE) (kernels before
// ≈v4.20), a KASLR kernel may lie above __START_KERNEL_map + 512 MiB; the
// text map is then 1 GiB (RANDOMIZE_BASE), and the walk stays on. With
// KERNELOFFSET 0 the text map stays 512 MiB, so module space at
// 0xffffffffa0000000 (the non-RANDOMIZE_BASE MODULES_VADDR) is walked.
func TestIssue13ImageSize(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stext, root  uint64
		kaslr        string
		module       uint64
		wantTextLast uint64
	}{
		{"kaslr above 512 MiB", 0xffffffffa5200000, 0xffffffffa6e0a000, "25200000", 0xffffffffc0a00000, startKernelMap + 1<<30 - 1},
		{"no kaslr", 0xffffffff81000000, 0xffffffff82a0a000, "0", 0xffffffffa0200000, startKernelMap + 512<<20 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newPhysMem(4096)
			const imagePA = 0x3000000
			b := newX86Builder(m, tc.root-tc.stext+imagePA, 4)
			for off := uint64(0); off < 64<<20; off += 2 << 20 {
				b.mapPage(tc.stext+off, imagePA+off, 21)
			}
			b.mapPage(tc.module, 0x23456000, 12)
			physBase := imagePA - (tc.stext - startKernelMap)
			in := info(t, "SYMBOL(_stext)="+hexs(tc.stext), "SYMBOL(init_top_pgt)="+hexs(tc.root),
				"NUMBER(phys_base)="+fmt.Sprint(int64(physBase)), "KERNELOFFSET="+tc.kaslr)
			tr, err := New(Config{Arch: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Info: in, Phys: m})
			require.NoError(t, err)
			l := tr.Layout()
			assert.Equal(t, 4, l.Levels, "walk on: %s", tr.Describe())
			require.NotEmpty(t, l.FastPaths)
			assert.Equal(t, tc.wantTextLast, l.FastPaths[0].Last)
			pa, err := tr.Translate(tc.stext + 0x1234)
			require.NoError(t, err)
			assert.Equal(t, uint64(imagePA+0x1234), pa)
			pa, err = tr.Translate(tc.module + 0x10)
			require.NoError(t, err)
			assert.Equal(t, uint64(0x23456010), pa)
		})
	}
}
