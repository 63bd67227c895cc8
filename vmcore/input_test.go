package vmcore

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdumpsyms/kdumpsyms/elfcore/elfcoretest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func onePageCore() []byte {
	return (&elfcoretest.Builder{
		Notes:    []elfcoretest.Note{elfcoretest.VMCOREINFONote(infoX86)},
		Segments: []elfcoretest.Segment{{Paddr: 0x1000, Data: bytes.Repeat([]byte{7}, 4096)}},
	}).Bytes()
}

// TestDirectoryInput: a directory is an error naming the dumps inside.
func TestDirectoryInput(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vmcore"), onePageCore(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vmcore-dmesg.txt"), []byte("[0.0] Linux\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dump.kdump"), []byte("KDUMP   and more"), 0o644))
	// Dumps wrapped and in memory-image formats are dumps; executables,
	// libraries and other wrapped files are not.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vmcore.gz"), compress(t, "gzip", onePageCore()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.gz"), compress(t, "gzip", []byte("not a dump")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vmcore.zst"), compress(t, "zstd", onePageCore()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.zst"), compress(t, "zstd", []byte("not a dump")), 0o644))
	// An xz file is taken by its magic: peeking would allocate its
	// dictionary.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.xz"), compress(t, "xz", []byte("not a dump")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "image.lime"), []byte("EMiL\x01\x00\x00\x00"+strings.Repeat("\x00", 24)), 0o644))
	exe := make([]byte, 64)
	copy(exe, "\x7fELF\x02\x01\x01")
	exe[16] = byte(elf.ET_EXEC)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kdump-syms"), exe, 0o755))
	beCore := slices.Clone(exe)
	beCore[5], beCore[16], beCore[17] = 2, 0, byte(elf.ET_CORE)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s390.core"), beCore, 0o644))
	_, err := Open(dir)
	var de *DirectoryError
	require.True(t, errors.As(err, &de), "%v", err)
	assert.Equal(t, dir, de.Path)
	assert.Equal(t, []string{"dump.kdump", "image.lime", "notes.xz", "s390.core", "vmcore", "vmcore.gz", "vmcore.zst"}, de.Dumps)
	_, err = Open(t.TempDir())
	require.True(t, errors.As(err, &de))
	assert.Empty(t, de.Dumps)

	// A directory of many dumps: the message names a few, on one line.
	many := t.TempDir()
	for i := range maxNamedDumps + 3 {
		require.NoError(t, os.WriteFile(filepath.Join(many, fmt.Sprintf("vmcore.%02d", i)), []byte("KDUMP   "), 0o644))
	}
	_, err = Open(many)
	require.True(t, errors.As(err, &de))
	assert.Len(t, de.Dumps, maxNamedDumps+3)
	assert.Contains(t, err.Error(), "vmcore.07 and 3 more (name one)")
	assert.NotContains(t, err.Error(), "vmcore.08")
}

// TestCharDeviceInput: a character device is refused at once, not read
// until it ends (it may never).
func TestCharDeviceInput(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/zero")
	}
	_, err := Open("/dev/zero")
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}

// TestFIFOInput: a FIFO is read to its end and opened from a temporary
// copy; one nobody writes to fails after a bounded wait.
func TestFIFOInput(t *testing.T) {
	t.Parallel() // its waits (0.3 s) overlap the other parallel tests
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	core := onePageCore()
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond) // the reader opens first
		done <- os.WriteFile(fifo, core, 0o600)
	}()
	d, err := OpenWith(Options{TempDir: t.TempDir()}, fifo)
	require.NoError(t, err)
	require.NoError(t, <-done)
	assert.Equal(t, "elf", d.Format())
	got := make([]byte, 16)
	_, err = d.Physical().ReadAt(got, 0x1000)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{7}, 16), got)
	require.NoError(t, d.Close())

	_, err = OpenWith(Options{NoSpool: true}, fifo)
	assert.ErrorIs(t, err, ErrNotSeekable)

	// No writer: the reader gives up after its wait.
	fh, err := openNonblock(fifo)
	require.NoError(t, err)
	defer fh.Close()
	start := time.Now()
	_, _, err = spool(&fifoReader{f: fh, wait: 200 * time.Millisecond}, fifo, Options{TempDir: t.TempDir()})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestStdinInput: "-" reads the dump from standard input, a pipe here.
func TestStdinInput(t *testing.T) {
	core := onePageCore()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	go func() { w.Write(core); w.Close() }()
	d, err := OpenWith(Options{TempDir: t.TempDir()}, Stdin)
	require.NoError(t, err)
	assert.Equal(t, infoX86, string(d.VMCOREINFO()))
	require.NoError(t, d.Close())
}

// FuzzDumpsIn: whatever a file in a directory given as the dump holds
// (a magic, a wrapper around anything, a truncated header), listing the
// directory ends, lists the file or not, and never panics.
func FuzzDumpsIn(f *testing.F) {
	f.Add(onePageCore())
	f.Add(compress(f, "gzip", onePageCore()))
	f.Add(compress(f, "zstd", onePageCore()))
	f.Add(compress(f, "xz", []byte("x")))
	f.Add([]byte("EMiL\x01\x00\x00\x00"))
	f.Add([]byte("\x7fELF\x02\x02\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := dumpsIn(dir); len(got) > 1 {
			t.Fatalf("one file listed as %v", got)
		}
	})
}
