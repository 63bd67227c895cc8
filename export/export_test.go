package export

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

func sym(name string, addr, size uint64, kind byte) symfinder.Symbol {
	return symfinder.Symbol{Name: name, Addr: addr, Size: size, Kind: symfinder.Kind(kind)}
}

// testSyms is a small kernel: text, data, more text, a weak function, a
// per-CPU absolute symbol, in kallsyms order (not address order).
var testSyms = []symfinder.Symbol{
	sym("irq_stack_backing_store", 0x4000, 0, 'A'),
	sym("_stext", 0xffffffff81000000, 0x10, 'T'),
	sym("local_fn", 0xffffffff81000010, 0x30, 't'),
	sym("weak_fn", 0xffffffff81000040, 0x40, 'W'),
	sym("init_task", 0xffffffff82000000, 0x1000, 'D'),
	sym("__func__.0", 0xffffffff82001000, 0x8, 'r'),
	sym("bss_var", 0xffffffff82002000, 0x8, 'b'),
	sym("_sinittext", 0xffffffff83000000, 0x100, 'T'),
}

func TestDeriveSections(t *testing.T) {
	got := DeriveSections(testSyms)
	assert.Equal(t, []Section{
		{Name: ".text", Base: 0xffffffff81000000, Size: 0x1000000, Exec: true},
		{Name: ".data", Base: 0xffffffff82000000, Size: 0x1000000},
		{Name: ".text.1", Base: 0xffffffff83000000, Size: 0x100, Exec: true},
	}, got)
	assert.Nil(t, DeriveSections(nil))
}

// TestTextLettersInData: 7.x letters .data symbols t and T (Debian 7.2.13's
// jiffies, init_task, _sdata, _edata) and rodata's end too; in
// [__start_rodata, __end_rodata] and [_sdata, _edata] they are objects in
// data sections, a module's t stays a function, and without both ends of
// a range the letter decides.
func TestTextLettersInData(t *testing.T) {
	syms := []symfinder.Symbol{
		sym("_stext", 0xffffffff81000000, 0x10, 'T'),
		sym("_etext", 0xffffffff81000010, 0, 'T'),
		sym("__start_rodata", 0xffffffff81800000, 0, 'D'),
		sym("__end_rodata", 0xffffffff81900000, 0, 'T'),
		sym("_sdata", 0xffffffff82000000, 0, 'T'),
		sym("jiffies", 0xffffffff82000040, 8, 'T'),
		sym("init_task", 0xffffffff82001000, 0x1000, 'T'),
		sym("_edata", 0xffffffff82002000, 0, 'T'),
		sym("_sinittext", 0xffffffff83000000, 0x100, 'T'),
	}
	assert.Equal(t, []Section{
		{Name: ".text", Base: 0xffffffff81000000, Size: 0x800000, Exec: true},
		{Name: ".data", Base: 0xffffffff81800000, Size: 0x1800000},
		{Name: ".text.1", Base: 0xffffffff83000000, Size: 0x100, Exec: true},
	}, DeriveSections(syms))
	var b bytes.Buffer
	require.NoError(t, WriteELF(&b, Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, elf.EM_X86_64}, syms, nil))
	f, err := elf.NewFile(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	got, err := f.Symbols()
	require.NoError(t, err)
	types := map[string]elf.SymType{}
	for _, s := range got {
		types[s.Name] = elf.ST_TYPE(s.Info)
	}
	assert.Equal(t, map[string]elf.SymType{
		"_stext": elf.STT_FUNC, "_etext": elf.STT_FUNC, "__start_rodata": elf.STT_OBJECT, "__end_rodata": elf.STT_OBJECT,
		"_sdata": elf.STT_OBJECT, "jiffies": elf.STT_OBJECT, "init_task": elf.STT_OBJECT, "_edata": elf.STT_OBJECT,
		"_sinittext": elf.STT_FUNC,
	}, types)

	mod := sym("xfs_fn", 0xffffffff82000080, 0x10, 't')
	mod.Module = "xfs"
	assert.True(t, isCode(mod, dataRanges(syms)))
	assert.True(t, isCode(syms[5], dataRanges(syms[4:6])), "no _edata: the letter decides")
}

func TestWriteELF(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Target
		syms []symfinder.Symbol
	}{
		{"x86_64", Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, elf.EM_X86_64}, testSyms},
		{"s390x", Target{memory.Target{ByteOrder: binary.BigEndian, PtrSize: 8}, elf.EM_S390}, testSyms},
		{"i386", Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, elf.EM_386}, []symfinder.Symbol{
			sym("_stext", 0xc1000000, 0x10, 'T'), sym("local_fn", 0xc1000010, 0x30, 't'), sym("jiffies", 0xc2000000, 4, 'D'),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteELF(&b, tc.t, tc.syms, nil))
			f, err := elf.NewFile(bytes.NewReader(b.Bytes()))
			require.NoError(t, err)
			assert.Equal(t, tc.t.Class(), f.Class)
			assert.Equal(t, tc.t.Machine, f.Machine)
			assert.Equal(t, tc.t.ByteOrder, f.ByteOrder)
			assert.Equal(t, elf.ET_EXEC, f.Type)
			got, err := f.Symbols()
			require.NoError(t, err)
			require.Len(t, got, len(tc.syms))
			byName := map[string]elf.Symbol{}
			for i, s := range got {
				byName[s.Name] = s
				if i > 0 && elf.ST_BIND(got[i-1].Info) != elf.STB_LOCAL {
					assert.NotEqual(t, elf.STB_LOCAL, elf.ST_BIND(s.Info), "locals come first")
				}
			}
			for _, want := range tc.syms {
				s, ok := byName[want.Name]
				require.True(t, ok, want.Name)
				assert.Equal(t, want.Addr, s.Value, want.Name)
				assert.Equal(t, want.Size, s.Size, want.Name)
				k := byte(want.Kind)
				bind, typ := elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info)
				switch {
				case k == 'W':
					assert.Equal(t, elf.STB_WEAK, bind, want.Name)
				case k >= 'A' && k <= 'Z':
					assert.Equal(t, elf.STB_GLOBAL, bind, want.Name)
				default:
					assert.Equal(t, elf.STB_LOCAL, bind, want.Name)
				}
				switch k {
				case 't', 'T', 'W':
					assert.Equal(t, elf.STT_FUNC, typ, want.Name)
				case 'A':
					assert.Equal(t, elf.STT_NOTYPE, typ, want.Name)
					assert.Equal(t, elf.SHN_ABS, s.Section, want.Name)
					continue
				default:
					assert.Equal(t, elf.STT_OBJECT, typ, want.Name)
				}
				require.Less(t, int(s.Section), len(f.Sections), want.Name)
				sec := f.Sections[s.Section]
				assert.True(t, s.Value >= sec.Addr && s.Value-sec.Addr < sec.Size, "%s in %s", want.Name, sec.Name)
				assert.Equal(t, typ == elf.STT_FUNC, sec.Flags&elf.SHF_EXECINSTR != 0, want.Name)
			}
		})
	}
}

func TestWriteELFErrors(t *testing.T) {
	var b bytes.Buffer
	t32 := Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 4}, elf.EM_386}
	// The first symbol above 4 GiB is named.
	err := WriteELF(&b, t32, testSyms, nil)
	assert.ErrorIs(t, err, ErrDoesNotFit)
	errshape.Require(t, err, "symbol _stext at 0xffffffff81000000 ")
	t64 := Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, elf.EM_X86_64}
	a, c := Section{Name: "a", Base: 0x1000, Size: 0x2000}, Section{Name: "b", Base: 0x2000, Size: 0x10}
	err = WriteELF(&b, t64, nil, []Section{c, a})
	var oe *OverlapError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, OverlapError{Section: a, Next: c}, *oe)
	errshape.Require(t, err, "0x1000", "0x2000")
	assert.ErrorIs(t, WriteELF(&b, Target{memory.Target{ByteOrder: binary.LittleEndian}, 0}, nil, nil), memory.ErrUnknownTarget)
}

func TestModuleSections(t *testing.T) {
	got := ModuleSections([]modsyms.Region{
		{Name: "MOD_TEXT", Base: 0xffffffffc0000000, Size: 0x3000, TextSize: 0x3000},
		{Name: "MOD_DATA", Base: 0xffffffffc0010000, Size: 0x1000},
		{Name: "MOD_RODATA", Base: 0xffffffffc0020000, Size: 0x1000},
		{Name: "MOD_INIT_TEXT", Base: 0, Size: 0, Init: true},
		{Name: "core", Base: 0xffffffffc0100000, Size: 0x5000, TextSize: 0x2000},
	})
	assert.Equal(t, []Section{
		{Name: ".text", Base: 0xffffffffc0000000, Size: 0x3000, Exec: true},
		{Name: ".data", Base: 0xffffffffc0010000, Size: 0x1000},
		{Name: ".rodata", Base: 0xffffffffc0020000, Size: 0x1000, ReadOnly: true},
		{Name: ".core.text", Base: 0xffffffffc0100000, Size: 0x2000, Exec: true},
		{Name: ".core.data", Base: 0xffffffffc0102000, Size: 0x3000},
	}, got)
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	t64 := Target{memory.Target{ByteOrder: binary.LittleEndian, PtrSize: 8}, elf.EM_X86_64}
	mods := []Module{
		{Name: "xfs", Sections: []Section{{Name: ".text", Base: 0xffffffffc0000000, Size: 0x1000, Exec: true}},
			Symbols: []symfinder.Symbol{sym("xfs_fn", 0xffffffffc0000010, 0x20, 't'), sym("outside", 0xffffffffc0100000, 8, 'd')}},
		{Name: "../evil"},
		{Name: "xfs"},
	}
	written, err := WriteDir(dir, t64, testSyms, mods)
	require.Error(t, err)
	// One error per module, naming it.
	var joined interface{ Unwrap() []error }
	require.ErrorAs(t, err, &joined)
	errs := joined.Unwrap()
	require.Len(t, errs, 2)
	assert.ErrorIs(t, errs[0], ErrModuleName)
	errshape.Require(t, errs[0], `module "../evil"`)
	assert.ErrorIs(t, errs[1], ErrNameClash)
	assert.NotErrorIs(t, errs[1], ErrModuleName)
	errshape.Require(t, errs[1], `module "xfs"`)
	assert.Equal(t, []string{filepath.Join(dir, "vmlinux.syms"), filepath.Join(dir, "xfs.ko.syms")}, written)
	f, err := elf.Open(filepath.Join(dir, "xfs.ko.syms"))
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.Symbols()
	require.NoError(t, err)
	require.Len(t, syms, 2)
	assert.Equal(t, ".text", f.Sections[syms[0].Section].Name)
	assert.Equal(t, elf.SHN_ABS, syms[1].Section, "a symbol in no region is absolute")
	_, err = os.Stat(filepath.Join(filepath.Dir(dir), "evil.ko.syms"))
	assert.True(t, os.IsNotExist(err))
}
