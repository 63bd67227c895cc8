package symfinder

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testSection struct {
	name       string
	typ        elf.SectionType
	flags      elf.SectionFlag
	addr, size uint64
}

type testSym struct {
	name       string
	typ        elf.SymType
	bind       elf.SymBind
	shndx      elf.SectionIndex
	value      uint64
	size       uint64
	wantLetter byte // 0: skipped
}

// Sections of the synthetic vmlinux; index 0 is SHT_NULL and the symbol
// and string tables follow these.
var testSections = []testSection{
	{},
	{".text", elf.SHT_PROGBITS, elf.SHF_ALLOC | elf.SHF_EXECINSTR, 0xffffffff81000000, 0x2000},
	{".rodata", elf.SHT_PROGBITS, elf.SHF_ALLOC, 0xffffffff82000000, 0x1000},
	{".data", elf.SHT_PROGBITS, elf.SHF_ALLOC | elf.SHF_WRITE, 0xffffffff82100000, 0x1000},
	{".bss", elf.SHT_NOBITS, elf.SHF_ALLOC | elf.SHF_WRITE, 0xffffffff82200000, 0x1000},
	{".data..percpu", elf.SHT_PROGBITS, elf.SHF_ALLOC | elf.SHF_WRITE, 0, 0x2d000},
	{".comment", elf.SHT_PROGBITS, elf.SHF_MERGE | elf.SHF_STRINGS, 0, 0x10},
	{".debug_info", elf.SHT_PROGBITS, 0, 0, 0x10},
}

// testSyms: locals first, as ELF requires.
var testSyms = []testSym{
	{"vmlinux.c", elf.STT_FILE, elf.STB_LOCAL, elf.SHN_ABS, 0, 0, 0},
	{"", elf.STT_SECTION, elf.STB_LOCAL, 1, 0xffffffff81000000, 0, 0},
	{"verify_cpu", elf.STT_FUNC, elf.STB_LOCAL, 1, 0xffffffff810001f0, 0x10, 't'},
	{"$x", elf.STT_NOTYPE, elf.STB_LOCAL, 1, 0xffffffff810001f0, 0, 0},
	{".Ltmp1", elf.STT_NOTYPE, elf.STB_LOCAL, 1, 0xffffffff810001f4, 0, 0},
	{"ro_local", elf.STT_OBJECT, elf.STB_LOCAL, 2, 0xffffffff82000100, 8, 'r'},
	{"static_data", elf.STT_OBJECT, elf.STB_LOCAL, 3, 0xffffffff82100040, 0x20, 'd'},
	{"bss_local", elf.STT_OBJECT, elf.STB_LOCAL, 4, 0xffffffff82200100, 0x100, 'b'},
	{"cpu_debug_store", elf.STT_OBJECT, elf.STB_LOCAL, 5, 0x1000, 0x1000, 'd'},
	{"abs_local", elf.STT_NOTYPE, elf.STB_LOCAL, elf.SHN_ABS, 0x1234, 0, 'a'},
	{"comment_sym", elf.STT_NOTYPE, elf.STB_LOCAL, 6, 0, 0, 'n'},
	{"debug_sym", elf.STT_NOTYPE, elf.STB_LOCAL, 7, 0, 0, 'N'},
	{"_text", elf.STT_NOTYPE, elf.STB_GLOBAL, 1, 0xffffffff81000000, 0, 'T'},
	{"startup_64", elf.STT_FUNC, elf.STB_GLOBAL, 1, 0xffffffff81000000, 0x70, 'T'},
	{"linux_banner", elf.STT_OBJECT, elf.STB_GLOBAL, 2, 0xffffffff82000000, 0x100, 'R'},
	{"_sdata", elf.STT_NOTYPE, elf.STB_GLOBAL, 3, 0xffffffff82100000, 0, 'D'},
	{"__bss_start", elf.STT_NOTYPE, elf.STB_GLOBAL, 4, 0xffffffff82200000, 0, 'B'},
	{"weak_fn", elf.STT_FUNC, elf.STB_WEAK, 1, 0xffffffff81000100, 0x20, 'W'},
	{"weak_obj", elf.STT_OBJECT, elf.STB_WEAK, 3, 0xffffffff82100100, 8, 'V'},
	{"resolver", elf.STT_GNU_IFUNC, elf.STB_GLOBAL, 1, 0xffffffff81000200, 0x10, 'i'},
	{"phys_startup_64", elf.STT_NOTYPE, elf.STB_GLOBAL, elf.SHN_ABS, 0x1000000, 0, 'A'},
	{"common_obj", elf.STT_OBJECT, elf.STB_GLOBAL, elf.SHN_COMMON, 8, 8, 'C'},
	{"printk", elf.STT_FUNC, elf.STB_GLOBAL, elf.SHN_UNDEF, 0, 0, 0},
	{"undef_weak", elf.STT_NOTYPE, elf.STB_WEAK, elf.SHN_UNDEF, 0, 0, 0},
}

// buildELF64 writes a relocatable-looking ELF64 with the sections and
// symbols above: header, the string tables and symtab, then the section
// headers. Only what debug/elf reads is filled in.
func buildELF64(t testing.TB, bo binary.ByteOrder) []byte {
	return buildELF64With(t, bo, testSyms)
}

// buildELF64With is buildELF64 with other symbols than testSyms.
func buildELF64With(t testing.TB, bo binary.ByteOrder, symbols []testSym) []byte {
	strtab := []byte{0}
	shstrtab := []byte{0}
	addStr := func(tab *[]byte, s string) uint32 {
		if s == "" {
			return 0
		}
		off := uint32(len(*tab))
		*tab = append(append(*tab, s...), 0)
		return off
	}
	syms := []elf.Sym64{{}}
	firstGlobal := 0
	for i, s := range symbols {
		if s.bind != elf.STB_LOCAL && firstGlobal == 0 {
			firstGlobal = i + 1
		}
		syms = append(syms, elf.Sym64{
			Name: addStr(&strtab, s.name), Info: elf.ST_INFO(s.bind, s.typ),
			Shndx: uint16(s.shndx), Value: s.value, Size: s.size,
		})
	}
	var symBuf bytes.Buffer
	require.NoError(t, binary.Write(&symBuf, bo, syms))

	secs := append([]testSection(nil), testSections...)
	symtabIdx := len(secs)
	secs = append(secs,
		testSection{name: ".symtab", typ: elf.SHT_SYMTAB},
		testSection{name: ".strtab", typ: elf.SHT_STRTAB},
		testSection{name: ".shstrtab", typ: elf.SHT_STRTAB})
	shdrs := make([]elf.Section64, len(secs))
	for i, s := range secs {
		shdrs[i] = elf.Section64{Name: addStr(&shstrtab, s.name), Type: uint32(s.typ), Flags: uint64(s.flags), Addr: s.addr, Size: s.size, Addralign: 1}
	}
	const ehsize = 64
	off := uint64(ehsize)
	place := func(i int, n int) {
		shdrs[i].Off, shdrs[i].Size = off, uint64(n)
		off += uint64(n)
	}
	place(symtabIdx, symBuf.Len())
	shdrs[symtabIdx].Link, shdrs[symtabIdx].Info, shdrs[symtabIdx].Entsize = uint32(symtabIdx+1), uint32(firstGlobal), elf.Sym64Size
	place(symtabIdx+1, len(strtab))
	place(symtabIdx+2, len(shstrtab))
	// Sections with contents that the test does not fill point at the
	// header, which is long enough and never read as such.
	for i := 1; i < symtabIdx; i++ {
		if secs[i].typ != elf.SHT_NOBITS {
			shdrs[i].Off, shdrs[i].Size = 0, min(secs[i].size, ehsize)
		}
	}

	var data byte = byte(elf.ELFDATA2LSB)
	if bo == binary.BigEndian {
		data = byte(elf.ELFDATA2MSB)
	}
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: off, Ehsize: ehsize, Shentsize: 64, Shnum: uint16(len(shdrs)), Shstrndx: uint16(symtabIdx + 2),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), data, byte(elf.EV_CURRENT)

	var out bytes.Buffer
	require.NoError(t, binary.Write(&out, bo, hdr))
	out.Write(symBuf.Bytes())
	out.Write(strtab)
	out.Write(shstrtab)
	require.NoError(t, binary.Write(&out, bo, shdrs))
	return out.Bytes()
}

func TestELFSymbols(t *testing.T) {
	const slide = 0x2c000000
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(bo.String(), func(t *testing.T) {
			img := buildELF64(t, bo)
			ix, err := NewELFSymbols(bytes.NewReader(img), "vmlinux", slide)
			require.NoError(t, err)
			assert.Equal(t, "vmlinux", ix.Name())

			var want []Symbol
			for _, s := range testSyms {
				if s.wantLetter == 0 {
					continue
				}
				addr := s.value
				if s.wantLetter != 'a' && s.wantLetter != 'A' && addr >= 0xffffffff81000000 {
					addr += slide
				}
				want = append(want, Symbol{Name: s.name, Addr: addr, Size: s.size, ELFSize: s.size, Kind: Kind(s.wantLetter)})
			}
			assert.Equal(t, want, collect(ix, Query{Kind: All}))

			hits := collect(ix, Query{Kind: ByAddr, Addr: 0xffffffff81000010 + slide})
			assert.Equal(t, []string{"startup_64"}, names(hits), "_text has size 0")
			s, ok := ix.Lookup(0xffffffff810001ff + slide)
			require.True(t, ok)
			assert.Equal(t, "verify_cpu+0xf/0x10", s.Format(0xffffffff810001ff+slide))
			s, ok = ix.Lookup(0x1800)
			require.True(t, ok, "per-CPU symbol below _text is not shifted")
			assert.Equal(t, "cpu_debug_store", s.Name)
			_, ok = ix.Lookup(0xffffffff81000080 + slide)
			assert.False(t, ok, "true sizes: nothing between startup_64 and weak_fn")
		})
	}
}

func TestOpenELFSymbols(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vmlinux")
	require.NoError(t, os.WriteFile(path, buildELF64(t, binary.LittleEndian), 0o644))
	ix, err := OpenELFSymbols(path, 0)
	require.NoError(t, err)
	assert.Equal(t, path, ix.Name())
	s := collect(ix, Query{Kind: ByName, Name: "startup_64"})
	require.Len(t, s, 1)
	assert.Equal(t, uint64(0xffffffff81000000), s[0].Addr)

	_, err = OpenELFSymbols(filepath.Join(t.TempDir(), "missing"), 0)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestELFSymbolsGoBinary reads real linker output: the test binary's own
// symtab, or, since go test strips it, gofmt's from GOROOT.
func TestELFSymbolsGoBinary(t *testing.T) {
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, exe)
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(out)), "bin", "gofmt"))
	}
	var ix *Index
	for _, path := range candidates {
		var err error
		if ix, err = OpenELFSymbols(path, 0); err == nil {
			t.Logf("%s: %d symbols", path, ix.Len())
			break
		}
		t.Logf("%s: %v", path, err)
	}
	if ix == nil {
		t.Skip("no Go binary with an ELF symtab at hand")
	}
	s := collect(ix, Query{Kind: ByName, Name: "runtime.main"})
	require.Len(t, s, 1)
	assert.Equal(t, Kind('T'), s[0].Kind)
	require.NotZero(t, s[0].Size)
	got, ok := ix.Lookup(s[0].Addr + s[0].Size - 1)
	require.True(t, ok)
	assert.Equal(t, "runtime.main", got.Name)
}

func TestELFSymbolsErrors(t *testing.T) {
	_, err := NewELFSymbols(bytes.NewReader([]byte("not an elf file at all, not at all")), "x", 0)
	assert.ErrorIs(t, err, ErrCorrupt)
	var fe *elf.FormatError
	require.ErrorAs(t, err, &fe)
	errshape.Require(t, err, "symfinder: x: ", "at byte 0x0") // one line, naming the file and the offset

	// Without .symtab: ErrNoSymbols, not corruption.
	img := buildELF64(t, binary.LittleEndian)
	f, err := elf.NewFile(bytes.NewReader(img))
	require.NoError(t, err)
	symtab := f.Section(".symtab")
	require.NotNil(t, symtab)
	shoff := binary.LittleEndian.Uint64(img[0x28:])
	idx := -1
	for i, s := range f.Sections {
		if s == symtab {
			idx = i
		}
	}
	stripped := bytes.Clone(img)
	binary.LittleEndian.PutUint32(stripped[shoff+uint64(idx)*64+4:], uint32(elf.SHT_PROGBITS))
	_, err = NewELFSymbols(bytes.NewReader(stripped), "x", 0)
	assert.ErrorIs(t, err, elf.ErrNoSymbols)
	assert.NotErrorIs(t, err, ErrCorrupt)

	// Truncations must fail cleanly, never panic.
	for n := 0; n < len(img); n += 7 {
		ix, err := NewELFSymbols(bytes.NewReader(img[:n]), "x", 0)
		if err != nil {
			assert.Nil(t, ix)
			errshape.Require(t, err, "symfinder: x: ")
		}
	}
}

// TestELFSymbolsExtents: a vmlinux with its section symbols answers as
// the kernel does (up to the next symbol, inside _stext.._end, per-CPU
// offsets answering nothing), the st_size staying in ELFSize.
func TestELFSymbolsExtents(t *testing.T) {
	symbols := append(slices.Clone(testSyms),
		testSym{"_stext", elf.STT_NOTYPE, elf.STB_GLOBAL, 1, 0xffffffff81000000, 0, 'T'},
		testSym{"__per_cpu_start", elf.STT_NOTYPE, elf.STB_GLOBAL, 5, 0, 0, 'D'},
		testSym{"__per_cpu_end", elf.STT_NOTYPE, elf.STB_GLOBAL, 5, 0x2d000, 0, 'D'},
		testSym{"_end", elf.STT_NOTYPE, elf.STB_GLOBAL, 4, 0xffffffff82201000, 0, 'B'},
	)
	const slide = 0x2c000000
	ix, err := NewELFSymbols(bytes.NewReader(buildELF64With(t, binary.LittleEndian, symbols)), "vmlinux", slide)
	require.NoError(t, err)
	for _, tc := range []struct {
		addr uint64
		want string
	}{
		{0xffffffff81000010 + slide, "_text+0x10/0x100"},       // _stext, _text, startup_64 alias; up to weak_fn
		{0xffffffff81000090 + slide, "_text+0x90/0x100"},       // past st_size 0x70: the padding is startup_64's
		{0xffffffff810001ff + slide, "verify_cpu+0xf/0x10"},    // up to resolver
		{0xffffffff81000210 + slide, "resolver+0x10/0xfffe00"}, // on to linux_banner in .rodata
		{0xffffffff82200fff + slide, "bss_local+0xeff/0xf00"},  // up to _end
		{0xffffffff82201000 + slide, ""},                       // _end is past the range
		{0xffffffff80ffffff + slide, ""},                       // below _stext
		{0x1000, ""}, {0x2d000, ""}, {0x1234, ""}, {0, ""},     // per-CPU offsets and absolutes
	} {
		var got string
		if s, ok := ix.Lookup(tc.addr); ok {
			got = s.Format(tc.addr)
		}
		assert.Equal(t, tc.want, got, "%#x", tc.addr)
	}
	hits := collect(ix, Query{Kind: ByAddr, Addr: 0xffffffff81000090 + slide})
	require.Equal(t, []string{"_text", "startup_64", "_stext"}, names(hits))
	assert.EqualValues(t, 0x70, hits[1].ELFSize)
	assert.EqualValues(t, 0x100, hits[1].Size)
	// cpu_debug_store's size ends with the per-CPU area.
	var cds Symbol
	_ = ix.Find(Query{Kind: ByName, Name: "cpu_debug_store"}, func(s Symbol) bool { cds = s; return false })
	assert.EqualValues(t, 0x1000, cds.ELFSize)
	assert.EqualValues(t, 0x2c000, cds.Size, "up to __per_cpu_end, past the absolute abs_local")
}
