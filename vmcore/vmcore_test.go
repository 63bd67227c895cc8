package vmcore

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

const infoX86 = "OSRELEASE=6.1.0-test-amd64\nPAGESIZE=4096\nSYMBOL(_stext)=ffffffff81000000\nNUMBER(phys_base)=0\nKERNELOFFSET=0\n"

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*13)
	}
	return b
}

// testCore is an x86_64 core with two CPUs, VMCOREINFO in a note (when
// withNote), and memory at 0 (1 MiB) and 16 MiB (64 KiB).
func testCore(withNote bool) []byte {
	bo := binary.LittleEndian
	notes := []elfcoretest.Note{
		{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusX86_64(bo, 1, 0xffffffff81000010, 0xffffc90000001000)},
		{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusX86_64(bo, 0, 0xffffffff81000020, 0xffffc90000002000)},
	}
	if withNote {
		notes = append(notes, elfcoretest.VMCOREINFONote(infoX86))
	}
	return (&elfcoretest.Builder{
		Notes: notes,
		Segments: []elfcoretest.Segment{
			{Paddr: 0, Vaddr: 0, Data: pattern(1<<20, 1)},
			{Paddr: 16 << 20, Vaddr: 16 << 20, Data: pattern(64<<10, 2)},
		},
	}).Bytes()
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// compressed memoizes compress: the tests wrap the same few cores again
// and again, and an xz writer alone allocates and clears megabytes.
var compressed sync.Map // compressKey → []byte

type compressKey struct {
	kind string
	sum  [sha256.Size]byte
}

// compress returns b wrapped in kind ("xz", "zstd" or "gzip"). Callers
// must not modify the result, which is shared.
func compress(t testing.TB, kind string, b []byte) []byte {
	t.Helper()
	key := compressKey{kind, sha256.Sum256(b)}
	if c, ok := compressed.Load(key); ok {
		return c.([]byte)
	}
	var buf bytes.Buffer
	switch kind {
	case "xz":
		// A dictionary the size of the test cores, not the default
		// 8 MiB: the writer allocates several times its size.
		w, err := xz.WriterConfig{DictCap: 1 << 21}.NewWriter(&buf)
		require.NoError(t, err)
		_, err = w.Write(b)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		require.NoError(t, err)
		_, err = w.Write(b)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case "gzip":
		w := kgzip.NewWriter(&buf)
		_, err := w.Write(b)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	default:
		t.Fatalf("compress: unknown wrapper %q", kind)
	}
	compressed.Store(key, buf.Bytes())
	return buf.Bytes()
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "temporary files left behind")
}

func TestOpenELF(t *testing.T) {
	p := writeFile(t, t.TempDir(), "vmcore", testCore(true))
	d, err := Open(p)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, "elf", d.Format())
	assert.Equal(t, infoX86, string(d.VMCOREINFO()))
	require.NotNil(t, d.Info())
	assert.NoError(t, d.InfoErr())
	assert.Equal(t, "6.1.0-test-amd64", d.Info().OSRelease())
	assert.Equal(t, "elf-note", d.InfoSource())
	assert.Equal(t, InfoOrigin{Kind: InfoELFNote}, d.InfoOrigin())
	assert.Equal(t, Arch{Name: "x86_64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}, Source: "elf"}, d.Arch())
	assert.Equal(t, 4096, d.PageSize())
	cpus := d.CPUs()
	require.Len(t, cpus, 2)
	assert.Equal(t, int32(1), cpus[0].PID)
	assert.Equal(t, uint64(0xffffffff81000020), cpus[1].PC)
	assert.Equal(t, uint64(0xffffc90000002000), cpus[1].SP)

	var b [16]byte
	require.NoError(t, memory.ReadFull(d.Physical(), b[:], 16<<20))
	assert.Equal(t, pattern(16, 2), b[:])
	_, err = d.Physical().ReadAt(b[:], 2<<20)
	assert.ErrorIs(t, err, memory.ErrNotSaved)

	// The kernel text map from NUMBER(phys_base): _stext maps to 16 MiB.
	k, err := d.Kernel()
	require.NoError(t, err)
	require.NoError(t, memory.ReadFull(k, b[:], 0xffffffff81000000))
	assert.Equal(t, pattern(16, 2), b[:])
	require.NoError(t, d.Close())
}

func TestWrappers(t *testing.T) {
	t.Parallel()
	core := testCore(true)
	for _, kind := range []string{"xz", "zstd", "gzip"} {
		t.Run(kind, func(t *testing.T) {
			tmp := t.TempDir()
			p := writeFile(t, t.TempDir(), "dump.bin", compress(t, kind, core))
			d, err := OpenWith(Options{TempDir: tmp}, p)
			require.NoError(t, err)
			assert.Equal(t, kind+"+elf", d.Format())
			assert.Equal(t, infoX86, string(d.VMCOREINFO()))
			var b [16]byte
			require.NoError(t, memory.ReadFull(d.Physical(), b[:], 16<<20))
			assert.Equal(t, pattern(16, 2), b[:])
			// On Linux the decompressed copy has no name: nothing is left
			// behind however the process ends.
			if runtime.GOOS == "linux" {
				emptyDir(t, tmp)
			}
			require.NoError(t, d.Close())
			emptyDir(t, tmp)

			// OpenReaderAt takes the same path.
			c := compress(t, kind, core)
			d, err = OpenReaderAt(bytes.NewReader(c), int64(len(c)), Options{TempDir: tmp})
			require.NoError(t, err)
			assert.Equal(t, kind+"+elf", d.Format())
			require.NoError(t, d.Close())
			emptyDir(t, tmp)
		})
	}
}

func TestUnrecognized(t *testing.T) {
	garbage := pattern(4096, 3)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"garbage", garbage, ErrUnrecognizedFormat},
		{"empty", nil, ErrUnrecognizedFormat},
		{"xz-garbage", compress(t, "xz", garbage), ErrUnrecognizedFormat},
		{"gzip-gzip", compress(t, "gzip", compress(t, "gzip", testCore(true))), ErrUnrecognizedFormat},
		{"truncated-zstd", compress(t, "zstd", testCore(true))[:100], nil},
		{"bad-gzip", []byte{0x1f, 0x8b, 0, 0, 0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			p := writeFile(t, t.TempDir(), "f", tc.data)
			d, err := OpenWith(Options{TempDir: tmp}, p)
			assert.Nil(t, d)
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			emptyDir(t, tmp)
		})
	}
}

func TestTooLarge(t *testing.T) {
	tmp := t.TempDir()
	p := writeFile(t, t.TempDir(), "f", compress(t, "zstd", testCore(true)))
	_, err := OpenWith(Options{TempDir: tmp, MaxDecompressedSize: 4096}, p)
	assert.ErrorIs(t, err, ErrTooLarge)
	emptyDir(t, tmp)
}

func TestMissingFile(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = Open()
	assert.Error(t, err)
}

// noteBytes is the VMCOREINFO note as the kernel keeps it in memory.
func noteBytes(bo binary.ByteOrder, text string) []byte {
	return elfcoretest.NoteBytes(bo, 4, []elfcoretest.Note{elfcoretest.VMCOREINFONote(text)})
}

func TestScanFallback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		at   uint64 // where the note goes in the 4 MiB of RAM
		bo   binary.ByteOrder
		m    elf.Machine
	}{
		{"le-low", 0x13000, binary.LittleEndian, elf.EM_X86_64},
		{"le-chunk-boundary", 1<<20 - 20, binary.LittleEndian, elf.EM_X86_64},
		{"le-header-at-boundary", 1<<20 - 6, binary.LittleEndian, elf.EM_X86_64},
		{"le-second-segment", 3<<20 + 0x123, binary.LittleEndian, elf.EM_X86_64},
		{"be", 0x2f000, binary.BigEndian, elf.EM_PPC64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ram := make([]byte, 4<<20)
			// Decoys: the text page without a header, a note header with
			// the wrong type, then a note whose text does not parse.
			copy(ram[0x1000:], "VMCOREINFO\x00\x00OSRELEASE=decoy\n")
			bad := noteBytes(tc.bo, "OSRELEASE=bad\nPAGESIZE=3\n")
			copy(ram[0x3000:], bad)
			wrongType := noteBytes(tc.bo, "OSRELEASE=wrong\n")
			tc.bo.PutUint32(wrongType[8:], 7)
			copy(ram[0x5000:], wrongType)
			copy(ram[tc.at:], noteBytes(tc.bo, infoX86))
			if tc.m == elf.EM_PPC64 {
				// x86 lines would contradict e_machine.
				copy(ram[tc.at:], noteBytes(tc.bo, "OSRELEASE=6.1.0-ppc\nPAGESIZE=65536\n"))
			}
			core := (&elfcoretest.Builder{
				ByteOrder: tc.bo, Machine: tc.m,
				Segments: []elfcoretest.Segment{
					{Paddr: 0, Data: ram[:3<<20]},
					{Paddr: 3 << 20, Data: ram[3<<20:]},
				},
			}).Bytes()
			d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
			require.NoError(t, err)
			defer d.Close()
			require.NotNil(t, d.Info(), "source %q", d.InfoSource())
			assert.Equal(t, fmt.Sprintf("memory-scan at %#x", tc.at), d.InfoSource())
			assert.Equal(t, InfoOrigin{Kind: InfoMemoryScan, Addr: tc.at}, d.InfoOrigin())
			if tc.m == elf.EM_PPC64 {
				assert.Equal(t, 65536, d.PageSize())
				assert.Equal(t, "ppc64", d.Arch().Name)
			} else {
				assert.Equal(t, "6.1.0-test-amd64", d.Info().OSRelease())
			}

			// With the scan disabled there is no VMCOREINFO.
			d2, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{ScanLimit: -1})
			require.NoError(t, err)
			assert.Nil(t, d2.VMCOREINFO())
			assert.Equal(t, "", d2.InfoSource())
			_, err = d2.Kernel()
			assert.Error(t, err)
			d2.Close()
		})
	}
}

func TestScanLimit(t *testing.T) {
	ram := make([]byte, 4<<20)
	copy(ram[3<<20:], noteBytes(binary.LittleEndian, infoX86))
	core := (&elfcoretest.Builder{Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}}}).Bytes()
	d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{ScanLimit: 2 << 20})
	require.NoError(t, err)
	assert.Nil(t, d.VMCOREINFO(), "note beyond the limit")
	d.Close()
}

func TestForceScan(t *testing.T) {
	ram := make([]byte, 1<<20)
	memText := strings.Replace(infoX86, "6.1.0-test-amd64", "6.1.0-from-memory", 1)
	copy(ram[0x8000:], noteBytes(binary.LittleEndian, memText))
	core := (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote(infoX86)},
		Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}},
	}).Bytes()
	d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
	require.NoError(t, err)
	assert.Equal(t, "elf-note", d.InfoSource())
	// The note in memory, found as a forced scan finds it.
	at, ok := d.FindVMCOREINFONote(0)
	assert.True(t, ok)
	assert.Equal(t, uint64(0x8000), at)
	_, ok = d.FindVMCOREINFONote(-1)
	assert.False(t, ok, "scan disabled")
	d.Close()
	d, err = OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{ForceScan: true})
	require.NoError(t, err)
	assert.Equal(t, "memory-scan at 0x8000", d.InfoSource())
	assert.Equal(t, memText, string(d.VMCOREINFO()))
	d.Close()
}

func TestS390Lowcore(t *testing.T) {
	bo := binary.BigEndian
	ram := make([]byte, 1<<20)
	text := "OSRELEASE=6.1.0-s390x\nPAGESIZE=4096\nSYMBOL(lowcore_ptr)=1f00\nSAMODE31=1673000\n"
	// A decoy that a scan would find first; the lowcore pointer wins.
	copy(ram[0x2000:], noteBytes(bo, "OSRELEASE=decoy\n"))
	copy(ram[0x80000:], noteBytes(bo, text))
	bo.PutUint64(ram[0xe0c:], 0x80000)
	core := (&elfcoretest.Builder{ByteOrder: bo, Machine: elf.EM_S390, Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}}}).Bytes()
	d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, "s390-lowcore at 0x80000", d.InfoSource())
	assert.Equal(t, text, string(d.VMCOREINFO()))
	assert.Equal(t, Arch{Name: "s390x", Target: memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8, PageSize: 4096}, Source: "elf"}, d.Arch())
}

// TestPPC64LEInBigEndianContainer: QEMU 7.2 writes the ELF header, program
// headers and notes of a ppc64le guest big-endian while its memory is
// little-endian, and pseries dumps carry no VMCOREINFO note: the note the
// kernel left in memory, found little-endian, makes the dump ppc64le; the
// PRSTATUS notes are read in the container's order.
func TestPPC64LEInBigEndianContainer(t *testing.T) {
	ram := make([]byte, 1<<20)
	text := "OSRELEASE=6.12.107+deb13-powerpc64le\nPAGESIZE=4096\nSYMBOL(_stext)=c000000000000000\nNUMBER(RADIX_MMU)=1\nKERNELOFFSET=0\n"
	copy(ram[0x3f000:], noteBytes(binary.LittleEndian, text))
	// struct elf_prstatus (ppc64): pr_pid at 32, pr_reg (pt_regs: gpr[32],
	// nip) at 112.
	prs := make([]byte, 112+48*8)
	be := binary.BigEndian
	be.PutUint32(prs[32:], 7)
	be.PutUint64(prs[112+1*8:], 0xc000000003f0fe00)  // r1
	be.PutUint64(prs[112+32*8:], 0xc000000000123456) // nip
	core := (&elfcoretest.Builder{ByteOrder: be, Machine: elf.EM_PPC64, Notes: []elfcoretest.Note{{Name: "CORE", Type: 1, Desc: prs}},
		Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}}}).Bytes()
	d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, "memory-scan at 0x3f000", d.InfoSource())
	assert.Equal(t, Arch{Name: "ppc64le", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}, Source: "elf+note-order"}, d.Arch())
	require.Len(t, d.CPUs(), 1)
	assert.Equal(t, uint64(0xc000000000123456), d.CPUs()[0].PC)
	assert.Equal(t, uint64(0xc000000003f0fe00), d.CPUs()[0].SP)
	assert.Equal(t, int32(7), d.CPUs()[0].PID)

	// A big-endian ppc64 kernel in a big-endian container stays ppc64.
	copy(ram[0x3f000:], noteBytes(be, text))
	core = (&elfcoretest.Builder{ByteOrder: be, Machine: elf.EM_PPC64, Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}}}).Bytes()
	d2, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
	require.NoError(t, err)
	defer d2.Close()
	assert.Equal(t, Arch{Name: "ppc64", Target: memory.Target{ByteOrder: be, PtrSize: 8, PageSize: 4096}, Source: "elf"}, d2.Arch())
}

func TestResolvePPC64(t *testing.T) {
	ppcInfo, err := vmcoreinfo.Parse([]byte("OSRELEASE=6.12.0\nSYMBOL(_stext)=c000000000000000\nNUMBER(RADIX_MMU)=1\n"))
	require.NoError(t, err)
	le, be := binary.ByteOrder(binary.LittleEndian), binary.ByteOrder(binary.BigEndian)
	// QEMU 10's kdump header says "Unknown": VMCOREINFO names the family,
	// the note's byte order the member.
	a, err := resolveArch(Arch{}, ppcInfo, le)
	require.NoError(t, err)
	assert.Equal(t, Arch{Name: "ppc64le", Target: memory.Target{ByteOrder: le, PtrSize: 8}, Source: "vmcoreinfo"}, a)
	a, err = resolveArch(Arch{}, ppcInfo, be)
	require.NoError(t, err)
	assert.Equal(t, "ppc64", a.Name)
	// The note came from a container that names no machine: its order is
	// unknown, and so is the architecture (no guess).
	a, err = resolveArch(Arch{}, ppcInfo, nil)
	require.NoError(t, err)
	assert.Equal(t, Arch{}, a)
	// A ppc64le ELF with its note in the container keeps the ELF's order.
	a, err = resolveArch(Arch{Name: "ppc64le", Target: memory.Target{ByteOrder: le}, Source: "elf"}, ppcInfo, nil)
	require.NoError(t, err)
	assert.Equal(t, Arch{Name: "ppc64le", Target: memory.Target{ByteOrder: le, PtrSize: 8}, Source: "elf"}, a)
	// Another architecture's VMCOREINFO in a ppc64 container is a mismatch.
	_, err = resolveArch(Arch{Name: "ppc64le", Target: memory.Target{ByteOrder: le}, Source: "elf"}, mustInfo(t, infoX86), nil)
	require.ErrorIs(t, err, memory.ErrCorrupt)
	// 32-bit PowerPC prints RADIX_MMU too: not ppc64.
	ppc32, err := vmcoreinfo.Parse([]byte("OSRELEASE=6.12.0\nSYMBOL(_stext)=c0000000\nNUMBER(RADIX_MMU)=0\n"))
	require.NoError(t, err)
	assert.Equal(t, "", ppc32.Arch())
}

func mustInfo(t *testing.T, text string) *vmcoreinfo.Info {
	in, err := vmcoreinfo.Parse([]byte(text))
	require.NoError(t, err)
	return in
}

// onePage is a PT_LOAD segment for cores whose memory a test does not read.
var onePage = []elfcoretest.Segment{{Paddr: 0, Data: make([]byte, 4096)}}

func TestArch(t *testing.T) {
	// VMCOREINFO's lines only hint at the architecture: the container's
	// machine decides, and a hint that disagrees is no corruption.
	t.Run("container wins", func(t *testing.T) {
		core := (&elfcoretest.Builder{Machine: elf.EM_AARCH64, Notes: []elfcoretest.Note{elfcoretest.VMCOREINFONote(infoX86)}, Segments: onePage}).Bytes()
		d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
		require.NoError(t, err)
		defer d.Close()
		assert.Equal(t, Arch{Name: "arm64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}, Source: "elf"}, d.Arch())
	})
	// riscv64 prints NUMBER(VA_BITS) as arm64 does: an EM_RISCV core whose
	// VMCOREINFO has only that line was once refused as corrupt.
	t.Run("riscv64", func(t *testing.T) {
		for _, text := range []string{"OSRELEASE=6.12.0-riscv64\nNUMBER(VA_BITS)=57\n",
			"OSRELEASE=6.12.0-riscv64\nNUMBER(phys_ram_base)=2147483648\nNUMBER(VA_BITS)=57\n"} {
			core := (&elfcoretest.Builder{Machine: elf.EM_RISCV, Notes: []elfcoretest.Note{elfcoretest.VMCOREINFONote(text)}, Segments: onePage}).Bytes()
			d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
			require.NoError(t, err)
			assert.Equal(t, Arch{Name: "riscv64", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, Source: "elf"}, d.Arch())
			d.Close()
		}
	})
	t.Run("i386-in-elf64", func(t *testing.T) {
		bo := binary.LittleEndian
		core := (&elfcoretest.Builder{Machine: elf.EM_386, Notes: []elfcoretest.Note{
			{Name: "CORE", Type: 1, Desc: elfcoretest.PRStatusI386(bo, 5, 0xc1000000, 0xc1800000)},
			elfcoretest.VMCOREINFONote("OSRELEASE=6.1.0-686\nPAGESIZE=4096\n"),
		}, Segments: onePage}).Bytes()
		d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
		require.NoError(t, err)
		assert.Equal(t, Arch{Name: "i386", Target: memory.Target{ByteOrder: bo, PtrSize: 4, PageSize: 4096}, Source: "elf"}, d.Arch())
		require.Len(t, d.CPUs(), 1)
		assert.Equal(t, uint64(0xc1000000), d.CPUs()[0].PC)
	})
	t.Run("arm-by-notes", func(t *testing.T) {
		// QEMU's kdump of a 32-bit ARM kernel says "Unknown" and a
		// non-LPAE kernel's VMCOREINFO names no architecture: the 148-byte
		// NT_PRSTATUS decides.
		desc := make([]byte, armPRStatusSize)
		binary.LittleEndian.PutUint32(desc[72+15*4:], 0xc0a1b2c4)
		notes := []elfcore.Note{{Name: "CORE", Type: 1, Desc: desc}}
		a := archFromNotes(notes)
		assert.Equal(t, Arch{Name: "arm", Target: memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, Source: "notes"}, a)
		cpus := cpusFromNotes(notes, a, nil)
		require.Len(t, cpus, 1)
		assert.Equal(t, uint64(0xc0a1b2c4), cpus[0].PC)
		assert.Equal(t, Arch{}, archFromNotes([]elfcore.Note{{Name: "CORE", Type: 1, Desc: make([]byte, 144)}}))
	})
	t.Run("uname", func(t *testing.T) {
		for m, want := range map[string]string{"x86_64": "x86_64", "aarch64": "arm64", "i686": "i386", "s390x": "s390x", "ppc64le": "ppc64le", "armv7l": "arm", "": "", "Unknown": "",
			"S390X": "s390x", // QEMU's s390x kdump header (ELF_MACHINE_UNAME), issue 13 part 6
		} {
			assert.Equal(t, want, archFromUname(m+"\x00\x00").Name, m)
		}
	})
}

func TestCorruptInfo(t *testing.T) {
	core := (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote("OSRELEASE=x\nPAGESIZE=3\n")},
		Segments: []elfcoretest.Segment{{Paddr: 0x1000, Data: pattern(0x1000, 4)}},
	}).Bytes()
	d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
	require.NoError(t, err, "a corrupt note must not stop physical reads")
	defer d.Close()
	assert.Nil(t, d.Info())
	assert.ErrorIs(t, d.InfoErr(), vmcoreinfo.ErrCorrupt)
	assert.Equal(t, "OSRELEASE=x\nPAGESIZE=3\n", string(d.VMCOREINFO()))
	var b [4]byte
	require.NoError(t, memory.ReadFull(d.Physical(), b[:], 0x1000))
	_, err = d.Kernel()
	assert.Error(t, err)
}

func TestKdumpRecognised(t *testing.T) {
	for _, head := range []string{"KDUMP   "} {
		b := append([]byte(head), make([]byte, 8192)...)
		_, err := OpenReaderAt(bytes.NewReader(b), int64(len(b)), Options{})
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrUnrecognizedFormat), "%q: %v", head, err)
	}
}

func TestWrapPhysical(t *testing.T) {
	core := testCore(true)
	var reads []uint64
	wrap := func(r memory.Reader) memory.Reader {
		return memory.ReaderFunc(func(p []byte, addr uint64) (int, error) {
			reads = append(reads, addr)
			return r.ReadAt(p, addr)
		})
	}
	d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{WrapPhysical: wrap})
	require.NoError(t, err)
	defer d.Close()
	require.NotNil(t, d.ELFCore())
	assert.Nil(t, d.Kdump())
	var b [8]byte
	_, err = d.Physical().ReadAt(b[:], 0x1000)
	require.NoError(t, err)
	assert.Contains(t, reads, uint64(0x1000), "Physical goes through the wrapper")

	// The scan reads through the wrapper too.
	reads = nil
	d2, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{WrapPhysical: wrap, ForceScan: true})
	require.NoError(t, err)
	defer d2.Close()
	assert.NotEmpty(t, reads, "VMCOREINFO scan")
}

func TestArchELFMachine(t *testing.T) {
	for _, m := range []elf.Machine{elf.EM_X86_64, elf.EM_386, elf.EM_AARCH64, elf.EM_ARM, elf.EM_S390, elf.EM_PPC64, elf.EM_RISCV, elf.EM_MIPS, elf.EM_PPC, elf.EM_LOONGARCH, elf.EM_SPARCV9} {
		for _, c := range []elf.Class{elf.ELFCLASS32, elf.ELFCLASS64} {
			for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				a := archFromELF(m, bo, c)
				assert.Equal(t, m, a.ELFMachine(), "%v %v %v → %q", m, c, bo, a.Name)
			}
		}
	}
	assert.Equal(t, elf.EM_NONE, Arch{}.ELFMachine())
	assert.Equal(t, elf.EM_NONE, Arch{Name: "nonsense"}.ELFMachine())
}

// TestNoLoadSegments: an ELF core with notes but no PT_LOAD (a Xen xc_core
// file keeps its pages in sections) is refused as unsupported, not opened
// as an empty dump.
func TestNoLoadSegments(t *testing.T) {
	core := (&elfcoretest.Builder{Notes: []elfcoretest.Note{elfcoretest.VMCOREINFONote(infoX86)}}).Bytes()
	_, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), Options{})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.NotErrorIs(t, err, ErrUnrecognizedFormat)
	path := filepath.Join(t.TempDir(), "xc_core")
	require.NoError(t, os.WriteFile(path, core, 0o644))
	_, err = Open(path)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}

// flattenStream writes file as a flattened stream (makedumpfile -F) of
// records of at most chunk bytes, the last first, then the end marker.
func flattenStream(file []byte, chunk int) []byte {
	out := make([]byte, 4096)
	copy(out, "makedumpfile")
	binary.BigEndian.PutUint64(out[16:], 1)
	binary.BigEndian.PutUint64(out[24:], 1)
	var recs [][2]int
	for off := 0; off < len(file); off += chunk {
		recs = append(recs, [2]int{off, min(chunk, len(file)-off)})
	}
	// Out of order, as makedumpfile writes page data before descriptors.
	recs = append(recs[len(recs)-1:], recs[:len(recs)-1]...)
	var h [16]byte
	for _, r := range recs {
		binary.BigEndian.PutUint64(h[:], uint64(r[0]))
		binary.BigEndian.PutUint64(h[8:], uint64(r[1]))
		out = append(out, h[:]...)
		out = append(out, file[r[0]:r[0]+r[1]]...)
	}
	binary.BigEndian.PutUint64(h[:], ^uint64(0))
	binary.BigEndian.PutUint64(h[8:], 0)
	return append(out, h[:]...)
}

// TestFlattenedELF: a flattened ELF core (makedumpfile -E -F) is read like
// a flattened kdump file, by path and from a reader, with the same bytes
// as the ELF core itself.
func TestFlattenedELF(t *testing.T) {
	ram := make([]byte, 3*4096)
	for i := range ram {
		ram[i] = byte(i * 7)
	}
	core := (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote(infoX86)},
		Segments: []elfcoretest.Segment{{Paddr: 0x100000, Data: ram}},
	}).Bytes()
	flat := flattenStream(core, 1000)
	path := filepath.Join(t.TempDir(), "vmcore.flat")
	require.NoError(t, os.WriteFile(path, flat, 0o644))
	for name, open := range map[string]func() (*Dump, error){
		"path":   func() (*Dump, error) { return Open(path) },
		"reader": func() (*Dump, error) { return OpenReaderAt(bytes.NewReader(flat), int64(len(flat)), Options{}) },
	} {
		t.Run(name, func(t *testing.T) {
			d, err := open()
			require.NoError(t, err)
			defer d.Close()
			assert.Equal(t, "elf-flattened", d.Format())
			assert.Equal(t, InfoOrigin{Kind: InfoELFNote}, d.InfoOrigin())
			assert.Equal(t, infoX86, string(d.VMCOREINFO()))
			require.NotNil(t, d.ELFCore())
			got := make([]byte, len(ram))
			_, err = d.Physical().ReadAt(got, 0x100000)
			require.NoError(t, err)
			assert.Equal(t, ram, got)
		})
	}
	// A flattened stream of something else is still not recognized.
	junk := flattenStream(bytes.Repeat([]byte("junk"), 1000), 512)
	_, err := OpenReaderAt(bytes.NewReader(junk), int64(len(junk)), Options{})
	assert.ErrorIs(t, err, ErrUnrecognizedFormat)
}

// TestArchFacts: the facts of an architecture the CLI and the unwinders
// read from it instead of spelling its name.
func TestArchFacts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		start  uint64
		digits int
		ret    bool
	}{
		{"x86_64", 1 << 63, 16, true}, {"i386", 0x80000000, 8, true}, {"arm64", 1 << 63, 16, false},
		{"arm", 0x80000000, 8, false}, {"s390x", 0, 16, false}, {"ppc64le", 1 << 63, 16, false}, {"riscv64", 1 << 63, 16, false},
	} {
		a := archByName(tc.name)
		assert.Equal(t, tc.start, a.KernelStart(), tc.name)
		assert.Equal(t, tc.digits, a.AddrDigits(), tc.name)
		assert.Equal(t, tc.ret, a.ReturnAddressFrames(), tc.name)
	}
}
