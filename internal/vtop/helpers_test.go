package vtop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// physMem is synthetic physical memory: pfn → page bytes, with a fixed page
// size. Reads of absent pages fail with memory.ErrNotSaved.
type physMem struct {
	shift uint
	pages map[uint64][]byte
	next  uint64 // next pfn handed out by alloc
}

func newPhysMem(pageSize int) *physMem {
	return &physMem{shift: pageShiftOf(uint64(pageSize)), pages: map[uint64][]byte{}, next: 0x100}
}

func (m *physMem) size() uint64 { return 1 << m.shift }

func (m *physMem) page(pfn uint64) []byte {
	p := m.pages[pfn]
	if p == nil {
		p = make([]byte, m.size())
		m.pages[pfn] = p
	}
	return p
}

// alloc returns the physical address of a fresh zeroed page.
func (m *physMem) alloc() uint64 {
	for m.pages[m.next] != nil {
		m.next++
	}
	m.page(m.next)
	m.next++
	return (m.next - 1) << m.shift
}

func (m *physMem) ReadAt(p []byte, addr uint64) (int, error) {
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		pg := m.pages[a>>m.shift]
		if pg == nil {
			return n, memory.Fault(a, "physical", "", memory.ErrNotSaved)
		}
		n += copy(p[n:], pg[a&(m.size()-1):])
	}
	return n, nil
}

func (m *physMem) write(addr uint64, b []byte) {
	for len(b) > 0 {
		pg := m.page(addr >> m.shift)
		n := copy(pg[addr&(m.size()-1):], b)
		b, addr = b[n:], addr+uint64(n)
	}
}

func (m *physMem) put64(bo binary.ByteOrder, addr, v uint64) {
	var b [8]byte
	bo.PutUint64(b[:], v)
	m.write(addr, b[:])
}

func (m *physMem) put32(bo binary.ByteOrder, addr uint64, v uint32) {
	var b [4]byte
	bo.PutUint32(b[:], v)
	m.write(addr, b[:])
}

func (m *physMem) get(bo binary.ByteOrder, size int, addr uint64) uint64 {
	var b [8]byte
	if _, err := m.ReadAt(b[:size], addr); err != nil {
		return 0
	}
	if size == 4 {
		return uint64(bo.Uint32(b[:]))
	}
	return bo.Uint64(b[:])
}

// info parses VMCOREINFO lines for a test.
func info(t testing.TB, lines ...string) *vmcoreinfo.Info {
	t.Helper()
	in, err := vmcoreinfo.Parse([]byte("OSRELEASE=6.1.0-test\n" + strings.Join(lines, "\n") + "\n"))
	require.NoError(t, err)
	return in
}

// x86Builder builds x86_64 page tables in a physMem.
type x86Builder struct {
	m      *physMem
	root   uint64
	levels int
	sme    uint64 // set in every table/page entry it writes
}

func newX86Builder(m *physMem, root uint64, levels int) *x86Builder {
	m.page(root >> 12)
	return &x86Builder{m: m, root: root, levels: levels}
}

// mapPage maps va → pa with a page of 1<<sizeShift bytes (12, 21 or 30).
func (b *x86Builder) mapPage(va, pa uint64, sizeShift uint) {
	bo := binary.LittleEndian
	table := b.root
	for l := b.levels; ; l-- {
		shift := 12 + 9*uint(l-1)
		at := table + (va>>shift&511)*8
		if shift == sizeShift {
			e := pa | b.sme | x86Present | 0x2 | 1<<63
			if l > 1 {
				e |= x86PSE
			}
			b.m.put64(bo, at, e)
			return
		}
		e := b.m.get(bo, 8, at)
		if e&x86Present == 0 {
			next := b.m.alloc()
			e = next | b.sme | x86Present | 0x2 | 0x60
			b.m.put64(bo, at, e)
		}
		table = e & x86PTEAddrMask &^ b.sme
	}
}

func hexs(v uint64) string { return fmt.Sprintf("%x", v) }

// walkFault checks a fault of the page-table walk: a *memory.FaultError
// at the virtual address va wrapping the *EntryError of the level where
// the walk stopped, in one line naming both addresses.
func walkFault(t *testing.T, err error, va uint64, level string) *EntryError {
	t.Helper()
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, va, fe.Addr)
	assert.Equal(t, memory.SpaceKernelVirtual, fe.Space)
	var ee *EntryError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, level, ee.Level)
	errshape.Require(t, err)
	return ee
}

// requireMissing checks that err is the *MissingError of arch for key
// ("" for no VMCOREINFO), matching vmcoreinfo.ErrMissingInfo, and that
// its one-line message names the key.
func requireMissing(t *testing.T, err error, arch, key string) {
	t.Helper()
	assert.ErrorIs(t, err, vmcoreinfo.ErrMissingInfo)
	var me *MissingError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, arch, me.Arch)
	assert.Equal(t, key, me.Key)
	errshape.Require(t, err, key)
}

// requireUnsupported checks that err is the *UnsupportedError want,
// matching errors.ErrUnsupported.
func requireUnsupported(t *testing.T, err error, want UnsupportedError) {
	t.Helper()
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	var ue *UnsupportedError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, want, *ue)
	errshape.Require(t, err)
}
