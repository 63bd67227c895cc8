package vmcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/memimage"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Options adjust Open. The zero value gives the defaults.
type Options struct {
	// TempDir is where wrapped dumps are decompressed when CacheDir is
	// ""; "" means os.TempDir(). On Linux the file has no name (O_TMPFILE),
	// so nothing is left behind however the process ends.
	TempDir string
	// CacheDir, when not "", keeps decompressed wrapped dumps between
	// runs, keyed by the SHA-256 of the wrapped file's content: a second
	// Open of the same .xz/.zst/.gz file hashes it instead of
	// decompressing it. See the package documentation.
	CacheDir string
	// CacheMaxBytes caps the entries kept in CacheDir, the least recently
	// used removed first; 0 means DefaultCacheMaxBytes.
	CacheMaxBytes int64
	// MaxDecompressedSize caps the size of a decompressed wrapper, against
	// decompression bombs; 0 means DefaultMaxDecompressedSize.
	MaxDecompressedSize int64
	// ScanLimit caps how many bytes of saved physical memory the VMCOREINFO
	// scan reads; 0 means DefaultScanLimit, and a negative value disables
	// the scan.
	ScanLimit int64
	// ForceScan ignores the VMCOREINFO the container carries and finds the
	// note in memory, as for a dump without one. For tests and diagnosis.
	ForceScan bool
	// NoSpool refuses inputs that cannot be read at random (standard
	// input as "-", pipes, FIFOs) with ErrNotSeekable instead of copying
	// them to a temporary file in TempDir.
	NoSpool bool
	// WrapPhysical, when not nil, wraps the container's physical reader
	// once at open. Every read of physical memory goes through the reader
	// it returns: Physical, the VMCOREINFO scan, and the page-table walks
	// and data reads of Kernel. kdump-syms extract passes a
	// memory.Recorder here to learn which pages decoding reads. The
	// wrapper must follow memory.Reader's contract; the container's own
	// virtual map (ELF p_vaddr) and the raw accessors (ELFCore, Kdump) are
	// not wrapped.
	WrapPhysical func(memory.Reader) memory.Reader
	// Raw, when not nil, reads the (single) input as a raw physical memory
	// image laid out as it says (memimage.NewRaw), without probing: a raw
	// image has no header. A wrapper (xz, zstd, gzip) is still removed
	// first. memimage.ParseRawLayout parses the command line's form.
	Raw []memimage.RawRange
	// Arch, when not "", names the architecture ("x86_64", "i386",
	// "arm64", "s390x", ...; see Arch.Name) for a dump whose container
	// does not record it (LiME, AVML, raw) and whose VMCOREINFO does not
	// tell (i386 writes no line of its own). Open fails with an error
	// wrapping memory.ErrCorrupt when the container or VMCOREINFO names
	// another one.
	Arch string
	// VMCOREINFO, when not nil, is the VMCOREINFO text to use instead of
	// the container's copy or the note in memory (a saved
	// /sys/kernel/vmcoreinfo note's text, kdump-syms vmcoreinfo output of
	// another dump of the same kernel, makedumpfile -g output).
	VMCOREINFO []byte
	// ValidateInfo, when not nil, is one more check of a VMCOREINFO text
	// when the container's copy and the note in memory differ (see
	// Dump.InfoCheck): given the kernel address space built from it, it
	// returns what it checked, or an error saying what does not hold. The
	// kdumpsyms session passes one that decodes the kallsyms tables and
	// compares their _stext with the text's SYMBOL(_stext).
	ValidateInfo func(kmem memory.Reader, info *vmcoreinfo.Info) (checked string, err error)
	// CheckInfo compares the container's VMCOREINFO with the note in
	// memory even when the container's passes the cheap check (OSRELEASE
	// against init_uts_ns). The scan for the note costs up to a second
	// per 100 MiB of compressed dump before it, so it is not the default.
	CheckInfo bool
}

// DefaultMaxDecompressedSize is the default cap on a decompressed wrapper:
// 1 TiB, larger than any dump this library is meant for.
const DefaultMaxDecompressedSize = 1 << 40

// DefaultScanLimit is the default cap on the VMCOREINFO scan: 16 GiB of
// saved memory.
const DefaultScanLimit = 16 << 30

// CPU is the state of one CPU when the dump was taken, from its NT_PRSTATUS
// note.
type CPU struct {
	PID  int32  // task running on the CPU; 0 when idle
	PC   uint64 // program counter
	SP   uint64 // stack pointer
	Regs []uint64
}

// backend is one container format.
type backend interface {
	physical() memory.Reader
	// virtual is the container's own virtual map, or nil.
	virtual() memory.Reader
	vmcoreinfo() []byte
	notes() []elfcore.Note
	// machine is the container's idea of the architecture; zero Arch
	// fields are unknown.
	machine() Arch
	// noteOrder is the byte order of the container's own headers and
	// notes (PRSTATUS), which is not always the kernel's; nil if unknown.
	noteOrder() binary.ByteOrder
	// pageSize is the container's page size, 0 if it does not record one.
	pageSize() int
	// physBase is x86_64's phys_base as the container knows it, or nil.
	physBase() *uint64
	// ranges yields the saved physical ranges in ascending order.
	ranges(yield func(start, last uint64) bool)
	close() error
}

// Dump is an open crash dump. Its methods are safe for concurrent use
// except Close; the readers it returns are as safe as their documentation
// says (the physical reader of an ELF core is; Kernel's is not).
type Dump struct {
	format string
	be     backend
	phys   memory.Reader // be.physical(), wrapped by Options.WrapPhysical
	held   []*tempFile   // decompressed dumps, until the backend opens them
	temps  []string      // named temporary files, removed by Close

	// cachedNow are the cache entries this Open added (CachedNow).
	cachedNow  []string
	raw        []byte
	check      InfoCheck
	info       *vmcoreinfo.Info
	infoErr    error
	infoSource string
	origin     InfoOrigin
	// deriveErr says why VMCOREINFO could not be derived from a memory
	// image without the note.
	deriveErr error

	arch Arch
	// noteOrder is the byte order of the VMCOREINFO note found in
	// memory (the kernel's), nil when it came from the container.
	noteOrder binary.ByteOrder
	cpus      []CPU

	kernelMu  sync.Mutex
	kernel    vtop.Translator
	kernelErr error
	kernelSet bool
}

// Open opens the dump in paths: one file, or the parts of a split
// kdump-compressed dump. See the package documentation for the formats.
// A path may be Stdin ("-"), a pipe or a FIFO: it is copied to a temporary
// file first (see Options.NoSpool); a directory is a *DirectoryError
// naming the dumps in it.
//
// Errors wrap ErrUnrecognizedFormat when no format matches, ErrTooLarge
// when a wrapper decompresses beyond the limit, ErrSingleFile when several
// paths are given for a dump that is not kdump-compressed,
// memory.ErrCorrupt for malformed files, and the os errors of opening and
// reading them.
func Open(paths ...string) (*Dump, error) { return OpenWith(Options{}, paths...) }

// OpenWith is Open with options.
func OpenWith(opt Options, paths ...string) (_ *Dump, err error) {
	if len(paths) == 0 {
		return nil, errors.New("vmcore: no dump file given")
	}
	d := &Dump{}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	// Unwrap compressed files first.
	plain := make([]string, len(paths))
	var wrapper string
	for i, name := range paths {
		p, spooled, err := prepareInput(name, opt)
		if spooled != "" {
			d.temps = append(d.temps, spooled)
		}
		if err != nil {
			return nil, fmt.Errorf("vmcore: %w", err)
		}
		fh, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		st, err := fh.Stat()
		if err != nil {
			fh.Close()
			return nil, err
		}
		w, u, err := unwrap(fh, st.Size(), opt)
		fh.Close()
		if u != nil {
			d.hold(u)
		}
		if err != nil {
			return nil, fmt.Errorf("vmcore: %s: %w", name, err)
		}
		if i > 0 && w != wrapper {
			return nil, fmt.Errorf("vmcore: %s: wrapped as %q but %s as %q", name, w, paths[0], wrapper)
		}
		wrapper = w
		plain[i] = p
		if u != nil {
			plain[i] = u.path
			if u.added {
				d.cachedNow = append(d.cachedNow, u.path)
			}
		}
	}
	var be backend
	var format string
	if opt.Raw != nil {
		be, format, err = openRaw(plain, opt.Raw)
	} else {
		be, format, err = probePaths(plain)
	}
	d.release()
	if err != nil {
		return nil, fmt.Errorf("vmcore: %s: %w", paths[0], err)
	}
	d.be = be
	d.format = format
	if wrapper != "" {
		d.format = wrapper + "+" + format
	}
	if err := d.init(opt); err != nil {
		return nil, fmt.Errorf("vmcore: %s: %w", paths[0], err)
	}
	return d, nil
}

// OpenReaderAt opens a single dump of size bytes read from r. The caller
// keeps r open while the Dump is used; Close does not close it. Wrapped
// dumps are decompressed to a temporary file as for Open. Errors are as
// for Open.
func OpenReaderAt(r io.ReaderAt, size int64, opt Options) (_ *Dump, err error) {
	d := &Dump{}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	w, u, err := unwrap(r, size, opt)
	if u != nil {
		d.hold(u)
	}
	if err != nil {
		return nil, fmt.Errorf("vmcore: %w", err)
	}
	switch {
	case u != nil && opt.Raw != nil:
		d.be, d.format, err = openRaw([]string{u.path}, opt.Raw)
		d.release()
		d.format = w + "+" + d.format
	case u != nil:
		d.be, d.format, err = probePaths([]string{u.path})
		d.release()
		d.format = w + "+" + d.format
	case opt.Raw != nil:
		d.be, d.format, err = openRawReader(r, size, opt.Raw)
	default:
		d.be, d.format, err = probeReader(r, size)
	}
	if err != nil {
		return nil, fmt.Errorf("vmcore: %w", err)
	}
	if err := d.init(opt); err != nil {
		return nil, fmt.Errorf("vmcore: %w", err)
	}
	return d, nil
}

// opener tries to open one format; it returns an error wrapping
// ErrUnrecognizedFormat when the input is not of its format.
type opener struct {
	name     string
	openPath func(paths []string) (backend, string, error)
	openRA   func(r io.ReaderAt, size int64) (backend, string, error)
}

var openers = []opener{elfOpener, kdumpOpener, flatELFOpener, memImageOpener}

func probePaths(paths []string) (backend, string, error) {
	for _, o := range openers {
		be, format, err := o.openPath(paths)
		if errors.Is(err, ErrUnrecognizedFormat) {
			continue
		}
		return be, format, err
	}
	return nil, "", ErrUnrecognizedFormat
}

func probeReader(r io.ReaderAt, size int64) (backend, string, error) {
	for _, o := range openers {
		if o.openRA == nil {
			continue
		}
		be, format, err := o.openRA(r, size)
		if errors.Is(err, ErrUnrecognizedFormat) {
			continue
		}
		return be, format, err
	}
	return nil, "", ErrUnrecognizedFormat
}

// init finds VMCOREINFO, the architecture, the page size and the CPUs.
func (d *Dump) init(opt Options) error {
	d.phys = d.be.physical()
	if opt.WrapPhysical != nil {
		d.phys = opt.WrapPhysical(d.phys)
	}
	arch := d.be.machine()
	switch {
	case opt.VMCOREINFO != nil:
		d.origin = InfoOrigin{Kind: InfoOption}
		d.raw, d.infoSource = opt.VMCOREINFO, InfoOption
		// Checked, not trusted: a text of another kernel or another boot
		// of it (another KASLR offset) contradicts the memory it would
		// translate, and is refused.
		a := arch
		if opt.Arch != "" && a.Name == "" {
			a = archByName(opt.Arch)
		}
		v := InfoVerdict{Origin: d.origin}
		v.Checked, v.Unchecked, v.Problems = d.validateInfo(a, d.raw, d.be.noteOrder(), opt.ValidateInfo)
		d.check.Container = v
		if !v.Valid() {
			e := &InfoMismatchError{Problems: v.Problems}
			if in, err := vmcoreinfo.Parse(d.raw); err == nil {
				e.Release = in.OSRelease()
			}
			return e
		}
	case !opt.ForceScan:
		if raw := d.be.vmcoreinfo(); len(raw) > 0 {
			d.origin = InfoOrigin{Kind: d.containerSource()}
			d.raw, d.infoSource = raw, d.origin.Kind
			a := arch
			if opt.Arch != "" && a.Name == "" {
				a = archByName(opt.Arch)
			}
			d.crossCheck(a, opt)
		}
	}
	if opt.Arch != "" {
		want := archByName(opt.Arch)
		if arch.Name != "" && arch.Name != want.Name {
			return fmt.Errorf("architecture mismatch: Options.Arch says %s, the container says %s (%s): %w", want.Name, arch.Name, arch.Source, memory.ErrCorrupt)
		}
		arch = want
	}
	if d.raw == nil {
		d.findInMemory(arch, opt)
	}
	if d.raw == nil && d.MemImage() != nil && opt.ScanLimit >= 0 && (arch.Name == "" || arch.Name == "x86_64" || arch.Name == "arm64") {
		d.derive(opt, arch.Name)
	}
	if d.raw != nil {
		d.info, d.infoErr = vmcoreinfo.Parse(d.raw)
	}
	var err error
	if d.arch, err = resolveArch(arch, d.info, d.noteOrder); err != nil {
		return err
	}
	if d.arch.Name == "" {
		d.arch = archFromNotes(d.be.notes())
	}
	d.arch.PageSize = d.be.pageSize()
	if d.info != nil {
		if ps, ok := d.info.PageSize(); ok && ps <= 1<<30 {
			d.arch.PageSize = int(ps)
		}
	}
	if d.arch.PageSize == 0 {
		d.arch.PageSize = defaultPageSize(d.arch.Name)
	}
	d.cpus = cpusFromNotes(d.be.notes(), d.arch, d.be.noteOrder())
	return nil
}

func (d *Dump) containerSource() string {
	if d.ELFCore() != nil {
		return InfoELFNote
	}
	return InfoKdumpHeader
}

// CachedNow returns the decompressed copies of wrapped inputs that this
// Open added to Options.CacheDir (nil when each was there already, or the
// cache is off), so that a program can tell its user that a copy of the
// evidence was kept and where.
func (d *Dump) CachedNow() []string { return d.cachedNow }

// Format names the container: "elf", "elf-flattened", "kdump",
// "kdump-flattened", "kdump-split", or the memory images "lime", "avml" and
// "raw" (Options.Raw), prefixed by the wrapper when there is one ("xz+elf",
// "zstd+kdump", "gzip+elf").
func (d *Dump) Format() string { return d.format }

// VMCOREINFO returns the raw VMCOREINFO text, or nil when none was found.
// The slice is the Dump's own; do not modify it.
func (d *Dump) VMCOREINFO() []byte { return d.raw }

// Info returns the parsed VMCOREINFO, or nil when none was found or it did
// not parse (then InfoErr says why).
func (d *Dump) Info() *vmcoreinfo.Info { return d.info }

// InfoErr returns the error parsing VMCOREINFO, which wraps
// vmcoreinfo.ErrCorrupt, or nil.
func (d *Dump) InfoErr() error { return d.infoErr }

// InfoSource says where VMCOREINFO came from: "elf-note", "kdump-header",
// "s390-lowcore at 0x…" or "memory-scan at 0x…" (the physical address of
// the note header), "option" (Options.VMCOREINFO), or "" when it was not
// found. When the container's copy differs from the note in memory and
// only the latter validates, it names the latter (see InfoCheck).
func (d *Dump) InfoSource() string { return d.infoSource }

// Where VMCOREINFO can come from, as InfoOrigin.Kind names it.
const (
	InfoELFNote     = "elf-note"     // the ELF core's VMCOREINFO note
	InfoKdumpHeader = "kdump-header" // the kdump sub-header's VMCOREINFO
	InfoS390Lowcore = "s390-lowcore" // the note the s390 lowcore points to
	InfoMemoryScan  = "memory-scan"  // a scan of physical memory for the note
	InfoOption      = "option"       // Options.VMCOREINFO
	// InfoDerived: a memory image without the note; the lines translation
	// needs were derived from memory (docs/formats.md §3.7).
	InfoDerived = "derived"
)

// InfoOrigin says where VMCOREINFO came from, as values: what InfoSource
// says in text.
type InfoOrigin struct {
	Kind string // InfoELFNote, InfoKdumpHeader, InfoS390Lowcore, InfoMemoryScan; "" when not found
	// Addr is the physical address of the note header when it was found
	// in memory (InfoS390Lowcore, InfoMemoryScan).
	Addr uint64
}

// InMemory reports whether the note was found in physical memory, at Addr.
func (o InfoOrigin) InMemory() bool { return o.Kind == InfoS390Lowcore || o.Kind == InfoMemoryScan }

// InfoOrigin returns where VMCOREINFO came from.
func (d *Dump) InfoOrigin() InfoOrigin { return d.origin }

// Physical returns a reader over the dump's physical memory. Unsaved
// addresses fail with a *memory.FaultError wrapping memory.ErrNotSaved.
func (d *Dump) Physical() memory.Reader { return d.phys }

// ELFCore returns the ELF core the dump was read from, or nil when it is
// not an ELF core. It gives writers such as kdump-syms extract the
// container's own segments and notes; reads through it bypass
// Options.WrapPhysical.
func (d *Dump) ELFCore() *elfcore.File {
	be := d.be
	if ob, ok := be.(*ownedBackend); ok {
		be = ob.backend // a flattened ELF core
	}
	if b, ok := be.(*elfBackend); ok {
		return b.f
	}
	return nil
}

// Kdump returns the kdump-compressed dump (one file, a flattened stream or
// a split set) the dump was read from, or nil when it is not one. As for
// ELFCore, reads through it bypass Options.WrapPhysical.
func (d *Dump) Kdump() *diskdump.Dump {
	if b, ok := d.be.(*kdumpBackend); ok {
		return b.d
	}
	return nil
}

// MemImage returns the memory image (LiME, AVML, raw) the dump was read
// from, or nil when it is not one. As for ELFCore, reads through it bypass
// Options.WrapPhysical.
func (d *Dump) MemImage() *memimage.File {
	be := d.be
	if ob, ok := be.(*ownedBackend); ok {
		be = ob.backend
	}
	if b, ok := be.(*memImageBackend); ok {
		return b.f
	}
	return nil
}

// Arch returns the dump's architecture.
func (d *Dump) Arch() Arch { return d.arch }

// PageSize returns the kernel's page size, Arch().PageSize: VMCOREINFO's
// PAGESIZE, else the container's block size, else the architecture's only
// size (4096 on x86, s390x), else 0.
func (d *Dump) PageSize() int { return d.arch.PageSize }

// CPUs returns the registers of each CPU from the dump's NT_PRSTATUS notes,
// in note order; nil when the architecture's layout is unknown.
func (d *Dump) CPUs() []CPU { return d.cpus }

// Close releases the files and removes temporary files. It returns the
// first error.
// hold keeps u's temporary file, if any, open until release.
func (d *Dump) hold(u *unwrapped) {
	if u.tmp != nil {
		d.held = append(d.held, u.tmp)
	}
}

// release closes the held temporary files once the backend has opened
// them (or failed to): an unnamed one lives on through the backend's own
// file, and a named one is removed by Close.
func (d *Dump) release() {
	for _, t := range d.held {
		t.Close()
		if !t.unnamed {
			d.temps = append(d.temps, t.Name())
		}
	}
	d.held = nil
}

func (d *Dump) Close() error {
	d.release()
	var first error
	if d.be != nil {
		first = d.be.close()
		d.be = nil
	}
	for _, t := range d.temps {
		if err := os.Remove(t); err != nil && first == nil && !errors.Is(err, os.ErrNotExist) {
			first = err
		}
	}
	d.temps = nil
	return first
}

// cpusFromNotes reads the PRSTATUS notes of architecture a, written in byte
// order bo (the container's, which QEMU 7.2 does not make the kernel's on
// ppc64le); nil bo means the kernel's.
func cpusFromNotes(notes []elfcore.Note, a Arch, bo binary.ByteOrder) []CPU {
	m := a.elfMachine()
	if bo == nil {
		bo = a.ByteOrder
	}
	if m == 0 || bo == nil {
		return nil
	}
	var out []CPU
	for _, n := range notes {
		if n.Name != "CORE" || n.Type != 1 {
			continue
		}
		ps, err := elfcore.ParsePRStatus(n.Desc, m, bo)
		if err != nil {
			continue
		}
		out = append(out, CPU{PID: ps.PID, PC: ps.PC, SP: ps.SP, Regs: ps.Regs})
	}
	return out
}
