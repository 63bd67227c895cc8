package vmcore

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// flatMem is physical memory [0, len(b)) for the derivation tests.
type flatMem []byte

func (m flatMem) ReadAt(p []byte, addr uint64) (int, error) {
	if addr >= uint64(len(m)) {
		return 0, memory.Fault(addr, "", "outside", memory.ErrNotSaved)
	}
	n := copy(p, m[addr:])
	if n < len(p) {
		return n, memory.Fault(addr+uint64(n), "", "outside", memory.ErrNotSaved)
	}
	return n, nil
}

func (m flatMem) ranges(yield func(start, last uint64) bool) {
	if len(m) > 0 {
		yield(0, uint64(len(m))-1)
	}
}

func (m flatMem) put(pa, v uint64) { binary.LittleEndian.PutUint64(m[pa:], v) }

// A synthetic x86_64 kernel: the image at physical 2 MiB, linked (with a
// KASLR slide) at _text 0xffffffff81200000, PD index 9 a 2 MiB page.
const (
	synText   = 0xffffffff81200000
	synImage  = 0x200000
	synRoot   = 0x201000 // init_top_pgt
	synPDPT   = 0x202000
	synPD     = 0x203000
	synBanner = 0x204000
	synPDIdx  = (synText - x86TextMap) >> 21
	tableFl   = x86Present | x86RW | 0x60 // _KERNPG_TABLE
	largeFl   = x86Present | x86RW | x86PSE | 0x60
)

func synKernel() flatMem {
	m := make(flatMem, 4<<20)
	m.put(synRoot+511*8, synPDPT|tableFl)
	m.put(synPDPT+510*8, synPD|tableFl)
	m.put(synPD+synPDIdx*8, synImage|largeFl)
	copy(m[synBanner:], "Linux version 6.99.0-test (x@y) (gcc) #1 SMP\n\x00")
	return m
}

func TestDeriveX86(t *testing.T) {
	m := synKernel()
	// A process's PGD outside the image shares the kernel half.
	copy(m[0x100000:0x101000], m[synRoot:synRoot+0x1000])
	x, err := deriveX86(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, "6.99.0-test", x.release)
	assert.Equal(t, uint64(synRoot), x.root)
	assert.Equal(t, uint64(synText+0x1000), x.rootVA)
	pa, va := uint64(synImage), uint64(synText)
	assert.Equal(t, pa-(va-x86TextMap), x.physBase)
	assert.Equal(t, uint64(synText), x.text)
	assert.Equal(t, uint64(synText+0x4000), x.bannerVA)
	assert.Equal(t, 2, x.roots)

	in, err := vmcoreinfo.Parse(x.vmcoreinfo())
	require.NoError(t, err)
	assert.Equal(t, "x86_64", in.Arch())
	pb, _ := in.Number("phys_base")
	assert.Equal(t, x.physBase, pb)
	off, _ := in.KernelOffset()
	assert.Equal(t, uint64(0x200000), off)
	root, _ := in.Symbol("init_top_pgt")
	assert.Equal(t, x.rootVA, root)
	assert.Contains(t, x.describe(), "init_top_pgt 0xffffffff81201000")
}

// TestDeriveX86PageTables: the text map read through 4 KiB page tables,
// the lowest address in the first one's first present entry.
func TestDeriveX86PageTables(t *testing.T) {
	m := synKernel()
	const pt = 0x300000
	m.put(synPD+synPDIdx*8, pt|tableFl)
	for j := uint64(3); j < 512; j++ {
		m.put(pt+j*8, (synImage+j<<12)|x86Present|x86RW)
	}
	// The root must be in the mapped part: move it past the holes.
	copy(m[0x205000:0x206000], m[synRoot:synRoot+0x1000])
	clear(m[synRoot : synRoot+0x1000])
	x, err := deriveX86(m, m.ranges, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, uint64(synText+0x3000), x.text)
	assert.Equal(t, uint64(0x205000), x.root)
}

func TestDeriveX86Errors(t *testing.T) {
	// The failures that find no table: the one candidate maps no banner
	// copy (listed) in the text map.
	noMap := func(banner uint64) DeriveError {
		return DeriveError{Kind: ErrNoPageTable, Banners: []uint64{banner}, Examined: 1}
	}
	for _, tc := range []struct {
		name string
		edit func(m flatMem)
		want DeriveError
	}{
		{"no banner", func(m flatMem) { clear(m[synBanner : synBanner+0x100]) }, DeriveError{Kind: ErrNoBanner, Scanned: 1 << 30}},
		{"no table", func(m flatMem) { m.put(synRoot+511*8, 0) }, DeriveError{Kind: ErrNoPageTable}},
		{"banner outside the image", func(m flatMem) {
			copy(m[0x100800:], m[synBanner:synBanner+0x100])
			clear(m[synBanner : synBanner+0x100])
		}, noMap(0x100800)},
		{"ambiguous", func(m flatMem) {
			// A second table in the image that maps itself too.
			copy(m[0x206000:0x207000], m[synRoot:synRoot+0x1000])
		}, DeriveError{Kind: ErrAmbiguous, Tables: []uint64{synRoot, 0x206000}}},
		{"disagree", func(m flatMem) {
			// Another table maps the same banner at another address.
			m.put(0x100000+511*8, 0x101000|tableFl)
			m.put(0x101000+510*8, 0x102000|tableFl)
			m.put(0x102000+20*8, synImage|largeFl)
		}, DeriveError{Kind: ErrAmbiguous, Tables: []uint64{0x100000, synRoot}}},
		{"not in the image", func(m flatMem) {
			copy(m[0x100000:0x101000], m[synRoot:synRoot+0x1000])
			clear(m[synRoot : synRoot+0x1000])
		}, DeriveError{Kind: ErrNoPageTable, Tables: []uint64{0x100000}}},
		{"two releases", func(m flatMem) {
			copy(m[synBanner+0x800:], "Linux version 5.0.0-other (x@y) #1\n")
		}, DeriveError{Kind: ErrAmbiguous, Banners: []uint64{synBanner, synBanner + 0x800}}},
		{"loop: the table is its own PDPT and PD", func(m flatMem) {
			m.put(synRoot+511*8, synRoot|tableFl)
			m.put(synRoot+510*8, synRoot|tableFl)
		}, noMap(synBanner)},
		{"loop: a PD entry points to the PD", func(m flatMem) {
			m.put(synPD+synPDIdx*8, synPD|tableFl)
		}, noMap(synBanner)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := synKernel()
			tc.edit(m)
			start := time.Now()
			_, err := deriveX86(m, m.ranges, 1<<30)
			checkDeriveErr(t, err, tc.want)
			assert.NotErrorIs(t, err, memory.ErrNotSaved, "every table was read")
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
	t.Run("unsaved page table", func(t *testing.T) {
		// The first table that could not be read is the cause, named.
		m := synKernel()
		m.put(synPD+synPDIdx*8, 0x7f000000|tableFl)
		_, err := deriveX86(m, m.ranges, 1<<30)
		checkDeriveErr(t, err, noMap(synBanner), "0xffffffff81200000")
		assert.ErrorIs(t, err, memory.ErrNotSaved)
		var fe *memory.FaultError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, uint64(0x7f000000), fe.Addr)
	})
}

// checkDeriveErr checks that err is the *DeriveError want (its cause Err
// aside), matching want.Kind, and that its one-line message names every
// table and banner of it, and where.
func checkDeriveErr(t *testing.T, err error, want DeriveError, where ...string) {
	t.Helper()
	var de *DeriveError
	require.ErrorAs(t, err, &de)
	got := *de
	got.Err, got.msg = nil, ""
	assert.Equal(t, want, got)
	assert.ErrorIs(t, err, want.Kind)
	for _, a := range append(slices.Clone(want.Tables), want.Banners...) {
		where = append(where, fmt.Sprintf("%#x", a))
	}
	errshape.Require(t, err, where...)
}

// TestDeriveX86Bounded: a memory full of tables pointing to distinct
// PDPTs is refused after maxRootTables of them, without reading them.
func TestDeriveX86Bounded(t *testing.T) {
	m := append(synKernel(), make(flatMem, 4<<20)...)
	for i := uint64(0); i < 2*maxRootTables; i++ {
		m.put(0x400000+i*0x1000+511*8, (0x10000000+i*0x1000)|tableFl)
	}
	_, err := deriveX86(m, m.ranges, 1<<30)
	checkDeriveErr(t, err, DeriveError{Kind: ErrTooManyTables, MaxTables: maxRootTables})
}

// TestDeriveX86PageTableBudget: PDs full of page tables are refused
// after maxPageTables page tables in all.
func TestDeriveX86PageTableBudget(t *testing.T) {
	m := synKernel()
	for i := uint64(0); i < 5; i++ {
		m.put(0x300000+i*0x1000+511*8, (0x310000+i*0x1000)|tableFl)
		m.put(0x310000+i*0x1000+510*8, (0x320000+i*0x1000)|tableFl)
		for j := uint64(0); j < 512; j++ {
			m.put(0x320000+i*0x1000+j*8, 0x330000|tableFl)
		}
	}
	_, err := deriveX86(m, m.ranges, 1<<30)
	checkDeriveErr(t, err, DeriveError{Kind: ErrTooManyTables, MaxTables: maxPageTables})
}

// TestDeriveX86Limit: the scan reads at most the limit, and says so.
func TestDeriveX86Limit(t *testing.T) {
	m := synKernel()
	_, err := deriveX86(m, m.ranges, 1<<20)
	checkDeriveErr(t, err, DeriveError{Kind: ErrNoBanner, Scanned: 1 << 20})
}

// FuzzDeriveX86 runs the derivation over arbitrary physical memory: it
// must end, and a result must be self-consistent.
func FuzzDeriveX86(f *testing.F) {
	f.Add([]byte(synKernel()[synImage : synImage+0x5000]))
	f.Add([]byte(strings.Repeat("Linux version 1 (", 300)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		// Place the data where the synthetic kernel's image is, so that
		// the seed's tables point into it.
		m := make(flatMem, synImage+len(data))
		copy(m[synImage:], data)
		x, err := deriveX86(m, m.ranges, 1<<30)
		if err != nil {
			return
		}
		if x.rootVA-x86TextMap+x.physBase != x.root {
			t.Fatalf("root %#x, VA %#x, phys_base %#x disagree", x.root, x.rootVA, x.physBase)
		}
		if x.bannerVA-x86TextMap+x.physBase != x.banner {
			t.Fatalf("banner %#x, VA %#x, phys_base %#x disagree", x.banner, x.bannerVA, x.physBase)
		}
		if _, err := vmcoreinfo.Parse(x.vmcoreinfo()); err != nil {
			t.Fatal(err)
		}
	})
}
