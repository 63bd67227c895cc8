package elfcore

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

const testInfo = "OSRELEASE=6.1.0-test\nPAGESIZE=4096\n"

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func open(t testing.TB, b []byte) *File {
	t.Helper()
	f, err := NewFile(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	return f
}

func TestVariants(t *testing.T) {
	for _, tc := range []struct {
		name    string
		class   elf.Class
		bo      binary.ByteOrder
		machine elf.Machine
		xnum    bool
		qemu    bool
	}{
		{"elf64-le", elf.ELFCLASS64, binary.LittleEndian, elf.EM_X86_64, false, false},
		{"elf64-be", elf.ELFCLASS64, binary.BigEndian, elf.EM_S390, false, false},
		{"elf32-le", elf.ELFCLASS32, binary.LittleEndian, elf.EM_386, false, false},
		{"elf32-be", elf.ELFCLASS32, binary.BigEndian, elf.EM_PPC, false, false},
		{"elf64-le-xnum", elf.ELFCLASS64, binary.LittleEndian, elf.EM_X86_64, true, false},
		{"elf32-be-xnum", elf.ELFCLASS32, binary.BigEndian, elf.EM_386, true, false},
		{"elf64-le-qemu72", elf.ELFCLASS64, binary.LittleEndian, elf.EM_X86_64, false, true},
		{"elf64-be-qemu72-xnum", elf.ELFCLASS64, binary.BigEndian, elf.EM_S390, true, true},
		{"elf64-i386-in-elf64", elf.ELFCLASS64, binary.LittleEndian, elf.EM_386, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pr []byte
			switch tc.machine {
			case elf.EM_386:
				pr = elfcoretest.PRStatusI386(tc.bo, 42, 0xc1000000, 0xc2000000)
			default:
				pr = elfcoretest.PRStatusX86_64(tc.bo, 42, 0xffffffff81000000, 0xffffc90000000000)
			}
			b := &elfcoretest.Builder{
				Class: tc.class, ByteOrder: tc.bo, Machine: tc.machine,
				ForceXNUM: tc.xnum, QEMULayout: tc.qemu,
				Notes: []elfcoretest.Note{
					{Name: "CORE", Type: 1, Desc: pr},
					{Name: "QEMU", Type: 0, Desc: make([]byte, 0x1b8)},
					elfcoretest.VMCOREINFONote(testInfo),
				},
				Segments: []elfcoretest.Segment{
					{Paddr: 0, Vaddr: 0, Data: pattern(0x3000, 1)},
					{Paddr: 0x100000, Vaddr: 0x100000, Data: pattern(0x1000, 2), Memsz: 0x2000},
				},
			}
			f := open(t, b.Bytes())
			assert.Equal(t, tc.class, f.Class())
			assert.Equal(t, tc.bo, f.ByteOrder())
			assert.Equal(t, tc.machine, f.Machine())
			require.NoError(t, f.NotesErr())
			require.Len(t, f.Notes(), 3)
			assert.Equal(t, "QEMU", f.Notes()[1].Name)
			assert.Equal(t, testInfo, string(f.VMCOREINFO()))
			require.Len(t, f.Segments(), 2)
			assert.Equal(t, uint64(0x2000), f.Segments()[1].Memsz)

			ps := f.PRStatus()
			if tc.machine == elf.EM_PPC {
				assert.Empty(t, ps, "no layout for 32-bit ppc")
			} else {
				require.Len(t, ps, 1)
				assert.Equal(t, int32(42), ps[0].PID)
				if tc.machine == elf.EM_386 {
					assert.Equal(t, uint64(0xc1000000), ps[0].PC)
					assert.Equal(t, uint64(0xc2000000), ps[0].SP)
				}
			}

			got := make([]byte, 0x2000)
			_, err := f.Physical().ReadAt(got, 0x100000)
			require.NoError(t, err)
			assert.Equal(t, pattern(0x1000, 2), got[:0x1000])
			assert.Equal(t, make([]byte, 0x1000), got[0x1000:], "tail beyond p_filesz reads zeros")
			_, ok := f.Virtual()
			assert.False(t, ok, "p_vaddr == p_paddr is not a virtual map")
		})
	}
}

func TestPRStatusArches(t *testing.T) {
	bo := binary.LittleEndian
	ps, err := ParsePRStatus(elfcoretest.PRStatusX86_64(bo, 7, 0x1111, 0x2222), elf.EM_X86_64, bo)
	require.NoError(t, err)
	assert.Equal(t, PRStatus{PID: 7, PC: 0x1111, SP: 0x2222, Regs: ps.Regs}, ps)
	assert.Len(t, ps.Regs, 27)

	ps, err = ParsePRStatus(elfcoretest.PRStatusARM64(bo, 8, 0x3333, 0x4444), elf.EM_AARCH64, bo)
	require.NoError(t, err)
	assert.Equal(t, int32(8), ps.PID)
	assert.Equal(t, uint64(0x3333), ps.PC)
	assert.Equal(t, uint64(0x4444), ps.SP)

	// 32-bit ARM: elf_prstatus of 148 bytes, pr_pid at 24, pr_reg (r0 …
	// r15, cpsr, orig_r0) at 72, as Debian's 6.12 armmp-lpae writes it.
	arm := make([]byte, 148)
	bo.PutUint32(arm[24:], 9)
	bo.PutUint32(arm[72+13*4:], 0xc2001f00)
	bo.PutUint32(arm[72+15*4:], 0xc0a1b2c4)
	ps, err = ParsePRStatus(arm, elf.EM_ARM, bo)
	require.NoError(t, err)
	assert.Equal(t, int32(9), ps.PID)
	assert.Equal(t, uint64(0xc0a1b2c4), ps.PC)
	assert.Equal(t, uint64(0xc2001f00), ps.SP)
	assert.Len(t, ps.Regs, 18)

	_, err = ParsePRStatus(make([]byte, 100), elf.EM_X86_64, bo)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	_, err = ParsePRStatus(make([]byte, 400), elf.EM_MIPS, bo)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}

// TestPNXNUM writes more program headers than e_phnum can hold.
func TestPNXNUM(t *testing.T) {
	const n = 70000
	segs := make([]elfcoretest.Segment, n)
	for i := range segs {
		// Every other page saved; one byte stored, the rest zero-filled.
		segs[i] = elfcoretest.Segment{Paddr: uint64(i) * 0x2000, Memsz: 0x1000, Data: []byte{byte(i), byte(i >> 8)}}
	}
	b := (&elfcoretest.Builder{Segments: segs}).Bytes()
	f := open(t, b)
	require.Len(t, f.Segments(), n)
	r := f.Physical()
	for _, i := range []int{0, 1, 65534, 65535, 65536, n - 1} {
		var buf [4]byte
		_, err := r.ReadAt(buf[:], uint64(i)*0x2000)
		require.NoError(t, err)
		assert.Equal(t, [4]byte{byte(i), byte(i >> 8)}, buf)
		_, err = r.ReadAt(buf[:], uint64(i)*0x2000+0x1000)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
	}
	// debug/elf sees no program headers at all.
	ef, err := elf.NewFile(bytes.NewReader(b))
	if err == nil {
		assert.Less(t, len(ef.Progs), n)
	}
}

func TestPhysicalReads(t *testing.T) {
	a, bb, c := pattern(0x1000, 10), pattern(0x1000, 20), pattern(0x800, 30)
	f := open(t, (&elfcoretest.Builder{Segments: []elfcoretest.Segment{
		{Paddr: 0x2000, Data: bb},
		{Paddr: 0x1000, Data: a}, // out of order on purpose
		{Paddr: 0x3000, Data: c, Memsz: 0x1000},
		{Paddr: 0x10000, Data: pattern(0x10, 40)},
	}}).Bytes())
	r := f.Physical()

	t.Run("spanning", func(t *testing.T) {
		buf := make([]byte, 0x3000)
		n, err := r.ReadAt(buf, 0x1000)
		require.NoError(t, err)
		assert.Equal(t, 0x3000, n)
		want := append(append(append([]byte{}, a...), bb...), c...)
		want = append(want, make([]byte, 0x800)...)
		assert.Equal(t, want, buf)
	})
	t.Run("hole", func(t *testing.T) {
		buf := make([]byte, 0x10)
		n, err := r.ReadAt(buf, 0x3ff8)
		assert.Equal(t, 8, n)
		var fe *memory.FaultError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, uint64(0x4000), fe.Addr)
		assert.Equal(t, memory.SpacePhysical, fe.Space)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
	})
	t.Run("below", func(t *testing.T) {
		_, err := r.ReadAt(make([]byte, 1), 0)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
	})
	t.Run("top", func(t *testing.T) {
		_, err := r.ReadAt(make([]byte, 8), ^uint64(0)-3)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
	})
}

func TestOverlap(t *testing.T) {
	// A covers [0x1000,0x3000); B starts inside A and extends past it; C is
	// nested in A. The lowest start wins; ties go to program header order.
	A, B, C, D := pattern(0x2000, 1), pattern(0x2000, 2), pattern(0x800, 3), pattern(0x1000, 4)
	f := open(t, (&elfcoretest.Builder{Segments: []elfcoretest.Segment{
		{Paddr: 0x2000, Data: B},
		{Paddr: 0x1000, Data: A},
		{Paddr: 0x1800, Data: C},
		{Paddr: 0x1000, Data: D}, // same start as A, later: shadowed
	}}).Bytes())
	r := f.Physical()
	for _, tc := range []struct {
		addr uint64
		want byte
	}{
		{0x1000, A[0]}, {0x1900, A[0x900]}, {0x2000, A[0x1000]}, {0x2fff, A[0x1fff]},
		{0x3000, B[0x1000]}, {0x3fff, B[0x1fff]},
	} {
		var b [1]byte
		_, err := r.ReadAt(b[:], tc.addr)
		require.NoError(t, err)
		assert.Equal(t, tc.want, b[0], "addr %#x", tc.addr)
	}
}

func TestVirtual(t *testing.T) {
	const direct = 0xffff888000000000
	t.Run("vmcore", func(t *testing.T) {
		// kdump's elfcorehdr: kernel text and RAM overlap physically.
		text := pattern(0x1000, 5)
		f := open(t, (&elfcoretest.Builder{Segments: []elfcoretest.Segment{
			{Paddr: 0x1000000, Vaddr: 0xffffffff81000000, Data: text},
			{Paddr: 0, Vaddr: direct, Data: make([]byte, 0x2000000)},
		}}).Bytes())
		v, ok := f.Virtual()
		require.True(t, ok)
		var b [8]byte
		_, err := v.ReadAt(b[:], 0xffffffff81000008)
		require.NoError(t, err)
		assert.Equal(t, text[8:16], b[:])
		_, err = v.ReadAt(b[:], direct+0x1000000)
		require.NoError(t, err)
		// Physically, the RAM segment starts lower and wins over text.
		_, err = f.Physical().ReadAt(b[:], 0x1000000)
		require.NoError(t, err)
		assert.Equal(t, make([]byte, 8), b[:])
	})
	t.Run("qemu-pre-4.0", func(t *testing.T) {
		f := open(t, (&elfcoretest.Builder{Segments: []elfcoretest.Segment{{Paddr: 0x1000, Data: make([]byte, 16)}}}).Bytes())
		_, ok := f.Virtual()
		assert.False(t, ok)
	})
	t.Run("kcore", func(t *testing.T) {
		// v4.11+: vmalloc has p_paddr = -1; pre-v4.11 everything had 0.
		for _, zero := range []bool{false, true} {
			ram := uint64(0x100000)
			if zero {
				ram = 0
			}
			f := open(t, (&elfcoretest.Builder{
				Notes: []elfcoretest.Note{{Name: "CORE", Type: 4, Desc: make([]byte, 64)}},
				Segments: []elfcoretest.Segment{
					{Paddr: ^uint64(0), Vaddr: 0xffffc90000000000, Data: pattern(0x1000, 1), Memsz: 0x100000000},
					{Paddr: ram, Vaddr: direct + 0x100000, Data: pattern(0x1000, 2)},
				},
			}).Bytes())
			_, ok := f.Virtual()
			assert.True(t, ok)
			_, err := f.Physical().ReadAt(make([]byte, 1), 0x100000)
			if zero {
				assert.ErrorIs(t, err, memory.ErrNotSaved)
			} else {
				assert.NoError(t, err)
			}
			_, err = f.Physical().ReadAt(make([]byte, 1), 0)
			assert.ErrorIs(t, err, memory.ErrNotSaved)
		}
	})
}

func TestTruncated(t *testing.T) {
	b := (&elfcoretest.Builder{Segments: []elfcoretest.Segment{{Paddr: 0x1000, Data: pattern(0x1000, 1)}}}).Bytes()
	b = b[:len(b)-0x800]
	f := open(t, b)
	buf := make([]byte, 0x1000)
	n, err := f.Physical().ReadAt(buf, 0x1000)
	assert.Equal(t, 0x800, n)
	var fe *memory.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, uint64(0x1800), fe.Addr)
	var fmtErr *FormatError
	require.ErrorAs(t, err, &fmtErr)
	assert.Equal(t, int64(len(b)), fmtErr.Off)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestUnrecognized(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":  nil,
		"short":  []byte("\x7fEL"),
		"text":   []byte("KDUMP   not an elf file at all, but long enough for a header ......."),
		"ET_EXE": func() []byte { b := (&elfcoretest.Builder{}).Bytes(); b[16] = byte(elf.ET_EXEC); return b }(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewFile(bytes.NewReader(b), int64(len(b)))
			assert.ErrorIs(t, err, ErrUnrecognizedFormat)
		})
	}
}

func TestMalformed(t *testing.T) {
	base := (&elfcoretest.Builder{Segments: []elfcoretest.Segment{{Paddr: 0x1000, Data: make([]byte, 16)}}}).Bytes()
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"class", func(b []byte) { b[elf.EI_CLASS] = 7 }},
		{"data", func(b []byte) { b[elf.EI_DATA] = 0 }},
		{"phentsize", func(b []byte) { binary.LittleEndian.PutUint16(b[54:], 20) }},
		{"phoff-beyond-eof", func(b []byte) { binary.LittleEndian.PutUint64(b[32:], 1<<40) }},
		{"phnum-beyond-eof", func(b []byte) { binary.LittleEndian.PutUint16(b[56:], 5000) }},
		{"xnum-no-shdr", func(b []byte) { binary.LittleEndian.PutUint16(b[56:], 0xffff) }},
		{"filesz-gt-memsz", func(b []byte) { binary.LittleEndian.PutUint64(b[64+40:], 1) }},
		{"offset-overflow", func(b []byte) { binary.LittleEndian.PutUint64(b[64+8:], 1<<63-4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(base)
			tc.edit(b)
			f, err := NewFile(bytes.NewReader(b), int64(len(b)))
			assert.Nil(t, f)
			assert.ErrorIs(t, err, memory.ErrCorrupt)
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			// One line, naming where: fe.Off.
			errshape.Require(t, err, fmt.Sprintf("offset %#x", fe.Off))
		})
	}
}

func TestNotes(t *testing.T) {
	bo := binary.BigEndian
	notes := []elfcoretest.Note{{Name: "CORE", Type: 1, Desc: []byte{1, 2, 3}}, {Name: "", Type: 9, Desc: nil}, {Name: "LINUX", Type: 0x300, Desc: []byte{4, 5, 6, 7, 8}}}
	for _, align := range []int{4, 8} {
		b := elfcoretest.NoteBytes(bo, align, notes)
		b = append(b, make([]byte, 24)...) // zero padding
		got, err := ParseNotes(b, bo, align)
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, Note{Name: "LINUX", Type: 0x300, Desc: []byte{4, 5, 6, 7, 8}}, got[2])
	}
	b := elfcoretest.NoteBytes(bo, 4, notes)
	b = append(b, 0, 0, 0, 4, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 'a', 'b', 'c', 0)
	got, err := ParseNotes(b, bo, 4)
	assert.Len(t, got, 3, "notes before the bad one are kept")
	assert.ErrorIs(t, err, memory.ErrCorrupt)

	// A bad note in the file: the file opens and NotesErr says why.
	f := open(t, (&elfcoretest.Builder{Notes: []elfcoretest.Note{elfcoretest.VMCOREINFONote(testInfo), {Name: "X", Desc: []byte{1}}}}).Bytes())
	require.NoError(t, f.NotesErr())
	raw := (&elfcoretest.Builder{Notes: []elfcoretest.Note{elfcoretest.VMCOREINFONote(testInfo)}}).Bytes()
	raw = append(raw, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0) // header claiming 64 KiB
	binary.LittleEndian.PutUint64(raw[64+32:], binary.LittleEndian.Uint64(raw[64+32:])+12)
	binary.LittleEndian.PutUint64(raw[64+40:], binary.LittleEndian.Uint64(raw[64+40:])+12)
	f = open(t, raw)
	assert.ErrorIs(t, f.NotesErr(), memory.ErrCorrupt)
	assert.Equal(t, testInfo, string(f.VMCOREINFO()))
}

func TestOpenFile(t *testing.T) {
	data := pattern(0x30000, 9) // larger than bulkRead
	b := (&elfcoretest.Builder{Segments: []elfcoretest.Segment{{Paddr: 0x4000, Data: data}}}).Bytes()
	path := filepath.Join(t.TempDir(), "vmcore")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	f, err := Open(path)
	require.NoError(t, err)
	// One bulk read (through the file) and page-sized ones (through the
	// mapping, where the platform maps files) give the same bytes.
	got := make([]byte, len(data))
	require.NoError(t, memory.ReadFull(f.Physical(), got, 0x4000))
	assert.Equal(t, data, got)
	clear(got)
	for off := 0; off < len(got); off += 0x1000 {
		require.NoError(t, memory.ReadFull(f.Physical(), got[off:off+0x1000], 0x4000+uint64(off)))
	}
	assert.Equal(t, data, got)

	// Truncate the file under the mapping: reads fail, in bulk or not,
	// and nothing crashes.
	require.NoError(t, os.Truncate(path, int64(len(b)-0x3000)))
	_, err = f.Physical().ReadAt(got, 0x4000)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	_, err = f.Physical().ReadAt(got[:0x1000], 0x4000+uint64(len(data))-0x1000)
	assert.Error(t, err)

	require.NoError(t, f.Close())
	_, err = f.Physical().ReadAt(got[:1], 0x4000)
	assert.ErrorIs(t, err, os.ErrClosed)

	_, err = Open(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestPhysicalRanges(t *testing.T) {
	f := open(t, (&elfcoretest.Builder{Segments: []elfcoretest.Segment{
		{Paddr: 0x1000, Data: make([]byte, 0x1000)},
		{Paddr: 0x2000, Data: make([]byte, 0x800), Memsz: 0x2000}, // adjacent, zero tail
		{Paddr: 0x8000, Memsz: 0x1000},                            // nothing saved
		{Paddr: 0x9000, Data: make([]byte, 0x10)},
	}}).Bytes())
	assert.Equal(t, []Range{{0x1000, 0x27ff}, {0x9000, 0x900f}}, f.PhysicalRanges())
}

// TestOverlapZeroTail: bytes a segment holds in the file win over another
// segment's zero-filled tail, whichever starts first (libkdumpfile's
// generated dumps overlap this way); zero tails still fill what no
// segment saved.
func TestOverlapZeroTail(t *testing.T) {
	A, B, C, D := pattern(0x800, 1), pattern(0x1000, 2), pattern(0x1000, 3), pattern(0x800, 4)
	f := open(t, (&elfcoretest.Builder{Segments: []elfcoretest.Segment{
		{Paddr: 0x1000, Data: A, Memsz: 0x2000}, // data [0x1000,0x1800), tail to 0x3000
		{Paddr: 0x2000, Data: B},                // inside A's tail
		{Paddr: 0x5000, Data: C},                // inside D's tail, D starts later in the headers
		{Paddr: 0x4000, Data: D, Memsz: 0x3000}, // data [0x4000,0x4800), tail to 0x7000
	}}).Bytes())
	r := f.Physical()
	for _, tc := range []struct {
		addr uint64
		want byte
	}{
		{0x1000, A[0]}, {0x17ff, A[0x7ff]}, {0x1800, 0}, {0x1fff, 0},
		{0x2000, B[0]}, {0x2fff, B[0xfff]},
		{0x4000, D[0]}, {0x47ff, D[0x7ff]}, {0x4800, 0},
		{0x5000, C[0]}, {0x5fff, C[0xfff]}, {0x6000, 0}, {0x6fff, 0},
	} {
		var b [1]byte
		_, err := r.ReadAt(b[:], tc.addr)
		require.NoError(t, err, "addr %#x", tc.addr)
		assert.Equal(t, tc.want, b[0], "addr %#x", tc.addr)
	}
	// One read across the pieces sees the same bytes.
	got := make([]byte, 0x2000)
	_, err := r.ReadAt(got, 0x1000)
	require.NoError(t, err)
	assert.Equal(t, A, got[:0x800])
	assert.Equal(t, make([]byte, 0x800), got[0x800:0x1000])
	assert.Equal(t, B, got[0x1000:])
	_, err = r.ReadAt(got[:1], 0x3000)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	assert.Equal(t, []Range{{0x1000, 0x17ff}, {0x2000, 0x2fff}, {0x4000, 0x47ff}, {0x5000, 0x5fff}}, f.PhysicalRanges())
}
