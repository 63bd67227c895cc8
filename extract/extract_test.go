package extract

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// dirNames lists a directory.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestExtractKeepAndOverwrite(t *testing.T) {
	dir := t.TempDir()
	ram := make([]byte, 64<<12)
	for p := range uint64(64) {
		copy(ram[p<<12:], page(p, 4096))
	}
	core := (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote("OSRELEASE=6.1.0-test\nPAGESIZE=4096\n")},
		Segments: []elfcoretest.Segment{{Paddr: 0x100000, Vaddr: 0x100000, Data: ram}},
	}).Bytes()
	in := filepath.Join(dir, "in.elf")
	require.NoError(t, os.WriteFile(in, core, 0o644))
	out := filepath.Join(dir, "out.elf")
	keep := []Range{{Start: 0x102000, End: 0x104001}, {Start: 0x200000, End: 0x201000}} // 3 pages, then one outside the dump
	res, err := Extract(out, []string{in}, Options{Keep: keep})
	require.NoError(t, err)
	assert.Equal(t, "elf", res.Format)
	assert.Equal(t, 3, res.Pages)
	assert.Equal(t, 1, res.NotSaved)
	assert.Equal(t, []string{out}, res.Files)
	// Decoding failed (no page tables in VMCOREINFO): reported, not fatal.
	require.NotEmpty(t, res.Consumers)
	assert.Equal(t, "translation", res.Consumers[1].Name)
	assert.Error(t, res.Consumers[1].Err)
	assert.ElementsMatch(t, []string{"in.elf", "out.elf"}, dirNames(t, dir))

	d, err := vmcore.Open(out)
	require.NoError(t, err)
	got := make([]byte, 3<<12)
	require.NoError(t, memory.ReadFull(d.Physical(), got, 0x102000))
	assert.Equal(t, ram[0x2000:0x5000], got)
	_, err = d.Physical().ReadAt(got[:1], 0x101000)
	assert.ErrorIs(t, err, memory.ErrNotSaved)
	assert.Equal(t, "OSRELEASE=6.1.0-test\nPAGESIZE=4096\n", string(d.VMCOREINFO()))
	d.Close()

	// An existing output is kept without Force, replaced with it.
	before, _ := os.ReadFile(out)
	_, err = Extract(out, []string{in}, Options{})
	assert.ErrorIs(t, err, ErrExists)
	after, _ := os.ReadFile(out)
	assert.Equal(t, before, after)
	res, err = Extract(out, []string{in}, Options{Force: true})
	require.NoError(t, err)
	assert.Equal(t, 0, res.Pages)
	assert.ElementsMatch(t, []string{"in.elf", "out.elf"}, dirNames(t, dir))

	// --format elf of an ELF, and a bad format.
	_, err = Extract(filepath.Join(dir, "x"), []string{in}, Options{Format: "kdump"})
	assert.Error(t, err)
}

func TestExtractCorruptInput(t *testing.T) {
	dir := t.TempDir()
	k, _ := testKdump(t, binary.LittleEndian, 8, "64-bit", 6)
	var w bufWriterAt
	require.NoError(t, WriteKdump([]io.WriterAt{&w}, k))
	good := filepath.Join(dir, "good.kdump")
	require.NoError(t, os.WriteFile(good, w.b, 0o644))

	// Point pfn 2's descriptor beyond the end of the file.
	d, err := os.ReadFile(good)
	require.NoError(t, err)
	bad := append([]byte(nil), d...)
	// Descriptors start after header, sub-header and bitmap blocks.
	subBlocks := binary.LittleEndian.Uint32(bad[432:])
	bmBlocks := binary.LittleEndian.Uint32(bad[436:])
	desc := (1 + int(subBlocks) + int(bmBlocks)) * 4096
	binary.LittleEndian.PutUint64(bad[desc+1*24:], uint64(len(bad)+4096)) // pages are 1,2,3,...: index 1 is pfn 2
	badPath := filepath.Join(dir, "bad.kdump")
	require.NoError(t, os.WriteFile(badPath, bad, 0o644))

	out := filepath.Join(dir, "out.kdump")
	_, err = Extract(out, []string{badPath}, Options{Keep: []Range{{Start: 0, End: 8 << 12}}})
	require.Error(t, err)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	var fe *diskdump.FormatError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, int64(desc+1*24), fe.Off, "the descriptor's offset")
	errshape.Require(t, err, badPath) // one line, naming the file and the offset
	assert.ElementsMatch(t, []string{"good.kdump", "bad.kdump"}, dirNames(t, dir), "no output, no temporary file")

	// A truncated header fails at open, naming the file.
	trunc := filepath.Join(dir, "trunc.kdump")
	require.NoError(t, os.WriteFile(trunc, d[:600], 0o644))
	_, err = Extract(out, []string{trunc}, Options{})
	require.Error(t, err)
	assert.ErrorIs(t, err, memory.ErrCorrupt)
	require.ErrorAs(t, err, &fe)
	errshape.Require(t, err, trunc) // one line, naming the file and the offset
	assert.Equal(t, 1, strings.Count(err.Error(), trunc), "the file is named once: %v", err)
	_, err = os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// The good one extracts, keeping the container and the blobs.
	res, err := Extract(out, []string{good}, Options{Keep: []Range{{Start: 0, End: 8 << 12}}})
	require.NoError(t, err)
	assert.Equal(t, "kdump", res.Format)
	assert.Equal(t, 5, res.Pages) // pfns 1, 2, 3, 5 and 6 of 0..7
}

// TestExtractKeepsNoteFoundByScan checks that the VMCOREINFO note in memory
// is kept when kallsyms cannot name vmcoreinfo_note (here: no kallsyms at
// all, as without CONFIG_KALLSYMS_ALL it lacks data symbols): extract finds
// it by vmcore's scan and keeps its pages, not the ones scanned before it,
// so a forced scan of the extract finds it where it was.
func TestExtractKeepsNoteFoundByScan(t *testing.T) {
	dir := t.TempDir()
	const text = "OSRELEASE=6.1.0-test\nPAGESIZE=4096\n"
	ram := make([]byte, 64<<12)
	for p := range uint64(64) {
		copy(ram[p<<12:], page(p, 4096))
	}
	const noteAt = 0x28000 // in ram
	note := binary.LittleEndian.AppendUint32(nil, 11)
	note = binary.LittleEndian.AppendUint32(note, uint32(len(text)))
	note = binary.LittleEndian.AppendUint32(note, 0)
	note = append(note, "VMCOREINFO\x00\x00"+text...)
	copy(ram[noteAt:], note)
	core := (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote(text)},
		Segments: []elfcoretest.Segment{{Paddr: 0x100000, Vaddr: 0x100000, Data: ram}},
	}).Bytes()
	in := filepath.Join(dir, "in.elf")
	require.NoError(t, os.WriteFile(in, core, 0o644))
	out := filepath.Join(dir, "out.elf")
	res, err := Extract(out, []string{in}, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, res.Consumers)
	assert.Equal(t, "vmcoreinfo", res.Consumers[0].Name)
	// The header and the page of text the kernel allocates after it.
	assert.Equal(t, []uint64{(0x100000 + noteAt) >> 12, (0x100000+noteAt)>>12 + 1}, res.Consumers[0].Pages)
	assert.Equal(t, 2, res.Pages)

	d, err := vmcore.OpenWith(vmcore.Options{ForceScan: true}, out)
	require.NoError(t, err)
	assert.Equal(t, "memory-scan at 0x128000", d.InfoSource())
	assert.Equal(t, text, string(d.VMCOREINFO()))
	d.Close()

	// A scan that may not read that far keeps nothing.
	res, err = Extract(out, []string{in}, Options{Force: true, Session: kdumpsyms.Options{Dump: vmcore.Options{ScanLimit: -1}}})
	require.NoError(t, err)
	assert.Empty(t, res.Consumers[0].Pages)
	assert.Equal(t, 0, res.Pages)
}
