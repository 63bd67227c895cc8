package vmcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// utsInfo is an x86_64 VMCOREINFO whose init_uts_ns lies at physical
// 0x200000 through the text map (phys_base 0).
const utsInfo = "OSRELEASE=6.1.0-true\nPAGESIZE=4096\nSYMBOL(_stext)=ffffffff80100000\nSYMBOL(init_uts_ns)=ffffffff80200000\nNUMBER(phys_base)=0\nKERNELOFFSET=0\n"

// utsCore is an ELF core carrying container (its note) over 4 MiB of RAM
// holding the note memText at 0x8000 and init_uts_ns (with a kref before
// it when kref) saying release.
func utsCore(container, memText, release string, kref bool) []byte {
	ram := make([]byte, 4<<20)
	copy(ram[0x8000:], noteBytes(binary.LittleEndian, memText))
	uts := 0x200000
	if kref {
		uts += 4
	}
	copy(ram[uts:], "Linux\x00")
	copy(ram[uts+2*utsLen:], release+"\x00")
	return (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote(container)},
		Segments: []elfcoretest.Segment{{Paddr: 0, Data: ram}},
	}).Bytes()
}

func TestInfoCheck(t *testing.T) {
	wrong := strings.Replace(utsInfo, "6.1.0-true", "6.1.0-fake", 1)
	open := func(t *testing.T, core []byte, opt Options) *Dump {
		t.Helper()
		d, err := OpenReaderAt(bytes.NewReader(core), int64(len(core)), opt)
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	t.Run("container validates", func(t *testing.T) {
		for _, kref := range []bool{false, true} {
			d := open(t, utsCore(utsInfo, wrong, "6.1.0-true", kref), Options{})
			assert.Equal(t, "elf-note", d.InfoSource())
			ck := d.InfoCheck()
			assert.True(t, ck.Container.Valid())
			assert.Equal(t, []string{"OSRELEASE matches init_uts_ns"}, ck.Container.Checked)
			assert.Equal(t, "", ck.Memory.Kind, "no scan when the container's copy validates")
			assert.Equal(t, "OSRELEASE matches init_uts_ns", ck.String())
		}
	})
	t.Run("memory validates", func(t *testing.T) {
		d := open(t, utsCore(wrong, utsInfo, "6.1.0-true", false), Options{})
		assert.Equal(t, "memory-scan at 0x8000", d.InfoSource())
		assert.Equal(t, utsInfo, string(d.VMCOREINFO()))
		assert.Equal(t, "6.1.0-true", d.Info().OSRelease())
		ck := d.InfoCheck()
		assert.True(t, ck.Differ)
		require.Len(t, ck.Verdicts, 2)
		assert.False(t, ck.Verdicts[0].Valid())
		assert.True(t, ck.Verdicts[1].Valid())
		assert.Contains(t, ck.String(), `elf-note does not (OSRELEASE "6.1.0-fake", init_uts_ns says "6.1.0-true"); the note in memory at 0x8000 validates (OSRELEASE matches init_uts_ns); using the note in memory`)
	})
	t.Run("check asked, agree", func(t *testing.T) {
		d := open(t, utsCore(utsInfo, utsInfo, "6.1.0-true", false), Options{CheckInfo: true})
		assert.Equal(t, "elf-note", d.InfoSource())
		assert.Equal(t, "OSRELEASE matches init_uts_ns; agrees with the note in memory at 0x8000", d.InfoCheck().String())
	})
	t.Run("extra check decides", func(t *testing.T) {
		other := strings.Replace(utsInfo, "KERNELOFFSET=0", "KERNELOFFSET=0\nSYMBOL(x)=1", 1)
		calls := 0
		extra := func(kmem memory.Reader, info *vmcoreinfo.Info) (string, error) {
			calls++
			if _, ok := info.Symbol("x"); ok {
				return "x checked", nil
			}
			return "", errors.New("no x")
		}
		d := open(t, utsCore(utsInfo, other, "6.1.0-true", false), Options{CheckInfo: true, ValidateInfo: extra})
		assert.Equal(t, 2, calls)
		assert.Equal(t, "memory-scan at 0x8000", d.InfoSource())
		assert.Contains(t, d.InfoCheck().String(), "elf-note does not (no x); the note in memory at 0x8000 validates (OSRELEASE matches init_uts_ns, x checked)")
	})
	t.Run("neither validates", func(t *testing.T) {
		d := open(t, utsCore(wrong, wrong, "6.1.0-other", false), Options{})
		assert.Equal(t, "elf-note", d.InfoSource())
		assert.Contains(t, d.InfoCheck().String(), `does not validate: OSRELEASE "6.1.0-fake", init_uts_ns says "6.1.0-other"; agrees with the note in memory`)
	})
	t.Run("option", func(t *testing.T) {
		d := open(t, utsCore(wrong, wrong, "6.1.0-true", false), Options{VMCOREINFO: []byte(utsInfo)})
		assert.Equal(t, "option", d.InfoSource())
		assert.Contains(t, d.InfoCheck().String(), "OSRELEASE matches init_uts_ns")
		assert.Equal(t, "6.1.0-true", d.Info().OSRelease())
	})
	t.Run("option of another kernel", func(t *testing.T) {
		_, err := OpenReaderAt(bytes.NewReader(utsCore(utsInfo, utsInfo, "6.1.0-true", false)), int64(len(utsCore(utsInfo, utsInfo, "6.1.0-true", false))), Options{VMCOREINFO: []byte(wrong)})
		var me *InfoMismatchError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, `the VMCOREINFO given (OSRELEASE 6.1.0-fake) is not this dump's: OSRELEASE "6.1.0-fake", init_uts_ns says "6.1.0-true"`, me.Error())
	})
}

// TestIssue28ForeignVMCOREINFO: a VMCOREINFO text the caller gives is
// checked, not trusted: the dump's own validates; another kernel's, or
// another boot's (every kernel symbol and KERNELOFFSET moved), is refused
// with an InfoMismatchError naming its release.
func TestIssue28ForeignVMCOREINFO(t *testing.T) {
	g := testutil.CorpusGuestNamed(t, "deb13-6.12-amd64")
	paths := g.RequireOneDump(t)
	own := g.VMCOREINFO(t)
	d, err := OpenWith(Options{VMCOREINFO: own}, paths...)
	require.NoError(t, err)
	assert.True(t, d.InfoCheck().Container.Valid())
	d.Close()

	other := testutil.CorpusGuestNamed(t, "deb12-6.1-amd64").VMCOREINFO(t)
	info, err := vmcoreinfo.Parse(own)
	require.NoError(t, err)
	slide, ok := info.KernelOffset()
	require.True(t, ok)
	var moved strings.Builder
	for line := range strings.Lines(string(own)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		if a, err := strconv.ParseUint(v, 16, 64); err == nil && strings.HasPrefix(k, "SYMBOL(") && a >= 0xffffffff80000000 {
			line = fmt.Sprintf("%s=%x\n", k, a-slide+0x1000000)
		} else if k == "KERNELOFFSET" {
			line = "KERNELOFFSET=1000000\n"
		}
		moved.WriteString(line)
	}
	for name, text := range map[string][]byte{"6.1": other, "another boot": []byte(moved.String())} {
		_, err := OpenWith(Options{VMCOREINFO: text}, paths...)
		var me *InfoMismatchError
		require.ErrorAs(t, err, &me, name)
		assert.ErrorIs(t, err, memory.ErrCorrupt, name)
		assert.NotErrorIs(t, err, memory.ErrNotSaved, name)
		wantRel, _ := vmcoreinfo.Parse(text)
		assert.Equal(t, wantRel.OSRelease(), me.Release, name)
		assert.NotEmpty(t, me.Problems, name)
	}
}
