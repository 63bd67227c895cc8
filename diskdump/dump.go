package diskdump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kdumpsyms/kdumpsyms/internal/safeio"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// part is one file of a dump.
type part struct {
	index    int // position among the files given, from 0
	ph       *partHeader
	r        io.ReaderAt // logical reader (rearranged view for flattened files)
	size     int64       // logical size
	bm       *bitmap
	flat     bool
	physSize int64
}

// Dump reads a kdump-compressed dump (one file or a split set). Its methods
// are safe for concurrent use.
type Dump struct {
	hdr     Header
	parts   []*part
	closers []io.Closer

	vmcoreinfo, notes, eraseinfo []byte

	shift uint // log2(block size)
	mu    sync.Mutex
	cache pageCache
	dec   decoders
	desc  descBlock

	// For reads of many pages (readMany): the pages to decode, a decoder
	// per extra goroutine, and the compressed data of a batch.
	jobs []pageJob
	more []*decoders
	span []byte
}

// Probe reports whether r starts with a kdump-compressed header ("KDUMP   ",
// or the old "DISKDUMP", which Open rejects as unsupported), directly or as
// the first data of a flattened (makedumpfile -F) stream.
func Probe(r io.ReaderAt) bool {
	var b [32]byte
	n, _ := r.ReadAt(b[:], 0)
	if n >= 8 && (string(b[:8]) == sigKdump || string(b[:8]) == sigDiskdump) {
		return true
	}
	if flat, known := isFlattened(b[:n]); !flat || !known {
		return false
	}
	// The header is the first record every known writer emits; look
	// there, then fall back to indexing the stream.
	var rec [flatRecordHeader + 8]byte
	if n, _ := r.ReadAt(rec[:], flatHeaderSize); n == len(rec) && binary.BigEndian.Uint64(rec[:]) == 0 {
		s := string(rec[flatRecordHeader:])
		return s == sigKdump || s == sigDiskdump
	}
	size, err := readerSize(r)
	if err != nil {
		return false
	}
	f, err := newFlatReader(r, size)
	if err != nil {
		return false
	}
	n, _ = f.ReadAt(b[:8], 0)
	return n == 8 && (string(b[:8]) == sigKdump || string(b[:8]) == sigDiskdump)
}

// Open opens a dump: one file, or every file of a split set in any order.
// The Dump owns the files; Close closes them. Errors: see NewDump, plus
// those of os.Open.
func Open(paths ...string) (*Dump, error) {
	if len(paths) == 0 {
		return nil, errors.New("diskdump: no files given")
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	rs := make([]io.ReaderAt, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
		rs = append(rs, f)
	}
	d, err := NewDump(rs...)
	if err != nil {
		closeAll()
		if len(paths) == 1 {
			return nil, &PathError{Path: paths[0], Err: err}
		}
		return nil, err
	}
	for _, f := range files {
		d.closers = append(d.closers, f)
	}
	return d, nil
}

func readerSize(r io.ReaderAt) (int64, error) {
	switch v := r.(type) {
	case interface{ Size() int64 }:
		return v.Size(), nil
	case interface{ Stat() (fs.FileInfo, error) }:
		fi, err := v.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	return 0, fmt.Errorf("diskdump: cannot tell the size of a %T (needs Size() or Stat()): %w", r, errors.ErrUnsupported)
}

// NewDump reads a dump from caller-owned readers: one file, or every file
// of a split set in any order. Each reader needs a Size() int64 or a
// Stat() method.
//
// Errors wrap ErrUnrecognizedFormat (not a kdump-compressed file),
// errors.ErrUnsupported (old DISKDUMP format, unsized reader), or ErrCorrupt
// via *FormatError (inconsistent headers, bitmaps, split ranges).
func NewDump(parts ...io.ReaderAt) (*Dump, error) {
	if len(parts) == 0 {
		return nil, errors.New("diskdump: no files given")
	}
	if len(parts) > maxParts {
		return nil, fmt.Errorf("diskdump: %d files in a split set (at most %d)", len(parts), maxParts)
	}
	d := &Dump{}
	for i, r := range parts {
		p, err := openPart(r)
		if p != nil {
			p.index = i
		}
		if err != nil {
			if len(parts) > 1 {
				err = fmt.Errorf("diskdump: file %d of %d: %w", i+1, len(parts), err)
			}
			return nil, err
		}
		d.parts = append(d.parts, p)
	}
	if err := d.assemble(); err != nil {
		return nil, err
	}
	if err := d.readBlobs(); err != nil {
		return nil, err
	}
	d.shift = d.parts[0].ph.shift
	d.cache.init(d.hdr.BlockSize)
	return d, nil
}

func openPart(r io.ReaderAt) (*part, error) {
	size, err := readerSize(r)
	if err != nil {
		return nil, err
	}
	p := &part{r: r, size: size, physSize: size}
	var b [32]byte
	n, err := r.ReadAt(b[:], 0)
	if n < len(b) && err != nil && err != io.EOF {
		return nil, fmt.Errorf("diskdump: header: %w", err)
	}
	if flat, _ := isFlattened(b[:n]); flat {
		f, err := newFlatReader(r, size)
		if err != nil {
			return nil, err
		}
		p.r, p.size, p.flat = f, f.Size(), true
	}
	if p.ph, err = parseHeader(p.r, p.size); err != nil {
		return nil, err
	}
	if err := p.loadBitmap(); err != nil {
		return nil, err
	}
	return p, nil
}

// loadBitmap reads the part of the 2nd bitmap covering the part's pfn
// range and checks that its page descriptors fit in the file.
func (p *part) loadBitmap() error {
	ph := p.ph
	start, end := ph.start, ph.end
	maxBits := uint64(ph.bitmapLen) * 8
	end = min(end, maxBits)
	if start >= end {
		p.bm = newBitmap(nil, 0, 0, 0)
		return nil
	}
	first := start / 64 * 8                // byte offset of the first word
	last := (end + 63) / 64 * 8            // byte offset after the last word
	last = min(last, uint64(ph.bitmapLen)) // the bitmap need not be a whole number of words
	n := last - first
	// The bitmap region was checked to lie in the logical file; for a
	// flattened stream that can be mostly holes, so also cap by the bytes
	// really stored.
	if n > uint64(p.physSize) {
		return formatErr(ph.bitmapOff, n, "bitmap larger than the file")
	}
	buf, err := safeio.ReadAt(p.r, n, ph.bitmapOff+int64(first))
	if err != nil {
		return fmt.Errorf("diskdump: bitmap at %#x: %w", ph.bitmapOff+int64(first), err)
	}
	p.bm = newBitmap(buf, first*8, start, end)
	if !ph.h.Incomplete() {
		need := p.bm.count
		if need > uint64(p.size-ph.descOff)/pageDescSize {
			return formatErr(ph.descOff, need, "%d page descriptors for the pages in the bitmap do not fit in the file", need)
		}
	}
	return nil
}

// assemble checks that the parts belong to one dump, orders them by pfn
// and fills in d.hdr.
func (d *Dump) assemble() error {
	slices.SortStableFunc(d.parts, func(a, b *part) int {
		switch {
		case a.ph.start < b.ph.start:
			return -1
		case a.ph.start > b.ph.start:
			return 1
		}
		return 0
	})
	p0 := d.parts[0].ph
	d.hdr = p0.h
	d.hdr.Split = p0.split
	for i, p := range d.parts {
		ph := p.ph
		if i > 0 {
			if !ph.split || !p0.split {
				return fmt.Errorf("diskdump: %d files given but they are not a --split set: %w", len(d.parts), &FormatError{Off: -1, What: "not a split dump"})
			}
			h := &ph.h
			if h.BlockSize != d.hdr.BlockSize || h.MaxMapnr != d.hdr.MaxMapnr || h.ByteOrder != d.hdr.ByteOrder || h.PtrSize != d.hdr.PtrSize {
				return &FormatError{Off: -1, What: "split files disagree on block size, max_mapnr or byte order"}
			}
			// makedumpfile writes one disk_dump_header, the same in every
			// part: the kernel's utsname and the time the dump was written.
			// A part of another dump (another boot, another run) differs.
			if diff := IdentityDiff(*h, d.hdr); diff != nil {
				return &FormatError{Off: -1, What: fmt.Sprintf("file %d of %d is a part of another dump than file %d: %s",
					p.index+1, len(d.parts), d.parts[0].index+1, strings.Join(diff, ", "))}
			}
			if prev := d.parts[i-1].ph; ph.start < prev.end {
				return formatErr(-1, ph.start, "split files overlap: [%#x, %#x) and [%#x, %#x)", prev.start, prev.end, ph.start, ph.end)
			}
		}
		d.hdr.Flattened = d.hdr.Flattened || p.flat
		d.hdr.Parts = append(d.hdr.Parts, Part{StartPFN: ph.start, EndPFN: ph.end, Flattened: p.flat, Pages: p.bm.count, Size: p.size})
	}
	return nil
}

// IdentityDiff lists how two dump headers' identities differ: the
// kernel's utsname fields and the time the dump was written, "node
// \"a\" and \"b\"" for each field that differs; nil when they agree.
func IdentityDiff(a, b Header) []string {
	var out []string
	for _, f := range []struct{ name, x, y string }{
		{"release", a.Release, b.Release}, {"version", a.Utsname.Version, b.Utsname.Version},
		{"node", a.Nodename, b.Nodename}, {"machine", a.Machine, b.Machine},
		{"domain", a.Domainname, b.Domainname}, {"system", a.Sysname, b.Sysname},
	} {
		if f.x != f.y {
			out = append(out, fmt.Sprintf("%s %q and %q", f.name, f.x, f.y))
		}
	}
	if !a.Timestamp.Equal(b.Timestamp) {
		out = append(out, fmt.Sprintf("written %s and %s", stamp(a.Timestamp), stamp(b.Timestamp)))
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "at no recorded time"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// readBlobs reads VMCOREINFO, notes and eraseinfo from the first file.
func (d *Dump) readBlobs() error {
	p := d.parts[0]
	for _, x := range []struct {
		b   blob
		dst *[]byte
	}{{p.ph.vmcoreinfo, &d.vmcoreinfo}, {p.ph.note, &d.notes}, {p.ph.eraseinfo, &d.eraseinfo}} {
		if x.b.size == 0 {
			continue
		}
		if x.b.size > p.physSize {
			return formatErr(x.b.off, uint64(x.b.size), "blob larger than the file")
		}
		buf, err := safeio.ReadAt(p.r, uint64(x.b.size), x.b.off)
		if err != nil {
			return fmt.Errorf("diskdump: blob at %#x: %w", x.b.off, err)
		}
		*x.dst = buf
	}
	if d.vmcoreinfo == nil && d.notes != nil {
		d.vmcoreinfo = findNote(d.notes, d.hdr.ByteOrder, "VMCOREINFO")
	}
	return nil
}

// findNote returns the descriptor of the first ELF note named name in
// blob, or nil.
func findNote(b []byte, bo binary.ByteOrder, name string) []byte {
	for len(b) >= 12 {
		namesz, descsz := uint64(bo.Uint32(b[0:])), uint64(bo.Uint32(b[4:]))
		b = b[12:]
		na, da := (namesz+3)&^3, (descsz+3)&^3
		if na > uint64(len(b)) || descsz > uint64(len(b))-na {
			return nil
		}
		nm := b[:namesz]
		if len(nm) > 0 && nm[len(nm)-1] == 0 {
			nm = nm[:len(nm)-1]
		}
		if string(nm) == name {
			return slices.Clip(b[na : na+descsz])
		}
		if da > uint64(len(b))-na {
			return nil
		}
		b = b[na+da:]
	}
	return nil
}

// Header returns the dump's header. The Parts slice is shared; do not
// modify it.
func (d *Dump) Header() Header { return d.hdr }

// PageSize returns the dump's page (block) size in bytes.
func (d *Dump) PageSize() int { return d.hdr.BlockSize }

// VMCOREINFO returns the raw VMCOREINFO text from the sub-header, or from
// the VMCOREINFO ELF note when the sub-header has no separate copy; nil if
// the dump has none.
func (d *Dump) VMCOREINFO() []byte { return d.vmcoreinfo }

// Notes returns the raw ELF note blob (header_version 4 and later), nil if
// none.
func (d *Dump) Notes() []byte { return d.notes }

// EraseInfo returns makedumpfile's eraseinfo text (header_version 5 and
// later), nil if none.
func (d *Dump) EraseInfo() []byte { return d.eraseinfo }

// PathError is an error of Open naming the file it opened.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// Close closes the files Open opened. It does nothing for NewDump.
func (d *Dump) Close() error {
	var errs []error
	for _, c := range d.closers {
		errs = append(errs, c.Close())
	}
	d.closers = nil
	return errors.Join(errs...)
}

// SavedPFNs yields every page frame number saved in the dump, in
// increasing order.
func (d *Dump) SavedPFNs() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for _, p := range d.parts {
			for pfn := range p.bm.all() {
				if !yield(pfn + d.hdr.PFNOffset) {
					return
				}
			}
		}
	}
}

// partFor returns the part holding dump pfn (after PFNOffset), or nil.
func (d *Dump) partFor(pfn uint64) *part {
	if len(d.parts) == 1 {
		return d.parts[0]
	}
	i, found := slices.BinarySearchFunc(d.parts, pfn, func(p *part, t uint64) int {
		switch {
		case p.ph.end <= t:
			return -1
		case p.ph.start > t:
			return 1
		}
		return 0
	})
	if !found {
		return nil
	}
	return d.parts[i]
}

// notSaved is returned inside a FaultError for absent pages.
var errExcluded = fmt.Errorf("excluded: %w", memory.ErrNotSaved)

// ReadAt reads physical memory at paddr into p; reads may span pages. It
// implements memory.Reader. A page that is not in the dump (excluded,
// beyond max_mapnr, in another split file not given, or lost in an
// incomplete dump) fails with a *memory.FaultError for the first missing
// address whose cause is memory.ErrNotSaved; a page that cannot be decoded
// fails with a *memory.FaultError whose cause is a *FormatError (ErrCorrupt)
// naming the pfn and file offset, or an I/O error.
func (d *Dump) ReadAt(p []byte, paddr uint64) (int, error) {
	bs := uint64(1) << d.shift
	d.mu.Lock()
	// Fast path: a read within one cached page.
	if off := paddr & (bs - 1); off+uint64(len(p)) <= bs {
		if pg, ok := d.cache.get(paddr >> d.shift); ok {
			n := copy(p, pg[off:])
			d.mu.Unlock()
			return n, nil
		}
	}
	defer d.mu.Unlock()
	if uint64(len(p)) >= manyPages*bs {
		return d.readMany(p, paddr)
	}
	n := 0
	for n < len(p) {
		a := paddr + uint64(n)
		if a < paddr {
			return n, memory.Fault(a, memory.SpacePhysical, "address wraps", memory.ErrNotSaved)
		}
		pg, err := d.page(a >> d.shift)
		if err != nil {
			return n, &memory.FaultError{Addr: a, Space: memory.SpacePhysical, Err: err}
		}
		n += copy(p[n:], pg[a&(bs-1):])
	}
	return n, nil
}

// manyPages is how many pages a read must span for readMany, and
// pagesPerWorker how many pages to decode make another goroutine worth it.
const (
	manyPages      = 16
	pagesPerWorker = 8
	maxWorkers     = 4
	// maxBatch bounds the pages decoded at once, and so the job list a
	// Dump keeps between reads, whatever the size of a read.
	maxBatch = 256
)

// pageJob is a whole page of a large read to decode straight into dst.
type pageJob struct {
	at  int // where dst starts in the read
	dst []byte
	pd  pageDesc
	p   *part
	pfn uint64
	err error
	// src is the page's data when readSpans read it, done is set when
	// it read a raw page straight into dst.
	src  []byte
	done bool
	// same, when not 0, is 1 + the index of an earlier job of the batch
	// whose page has the same stored data (see markSame).
	same int
}

// readMany is ReadAt for a read spanning many pages (the caller holds
// d.mu): a kallsyms or BTF table, a module's symtab. Partial pages at
// either end go through the cache as usual; whole pages are copied from
// the cache when there, and otherwise decoded straight into p, on up to
// maxWorkers goroutines (GOMAXPROCS permitting), each with a decoder of its
// own. The result is what the page-by-page loop gives: the bytes up to the
// first page that is missing or does not decode, and that page's error.
func (d *Dump) readMany(p []byte, paddr uint64) (int, error) {
	bs := uint64(1) << d.shift
	n := 0
	fault := func(a uint64, err error) error {
		return &memory.FaultError{Addr: a, Space: memory.SpacePhysical, Err: err}
	}
	// A partial first page.
	if off := paddr & (bs - 1); off != 0 {
		pg, err := d.page(paddr >> d.shift)
		if err != nil {
			return 0, fault(paddr, err)
		}
		n = copy(p, pg[off:])
	}
	// Whole pages, a batch of at most maxBatch at a time: copied from the
	// cache, or noted to decode, up to the first one not in the dump.
	for uint64(len(p)-n) >= bs {
		jobs := d.jobs[:0]
		stop, stopErr := -1, error(nil)
		for uint64(len(p)-n) >= bs && len(jobs) < maxBatch {
			a := paddr + uint64(n)
			if a < paddr {
				stop, stopErr = n, memory.Fault(a, memory.SpacePhysical, "address wraps", memory.ErrNotSaved)
				break
			}
			pfn := a >> d.shift
			if pg, ok := d.cache.get(pfn); ok {
				n += copy(p[n:], pg)
				continue
			}
			pd, part, err := d.descriptor(pfn)
			if err != nil {
				stop, stopErr = n, fault(a, err)
				break
			}
			jobs = append(jobs, pageJob{at: n, dst: p[n : n+int(bs)], pd: pd, p: part, pfn: pfn})
			n += int(bs)
		}
		d.decodeJobs(jobs)
		d.jobs = jobs[:0]
		for i := range jobs {
			if err := jobs[i].err; err != nil {
				at := jobs[i].at
				clear(jobs)
				return at, fault(paddr+uint64(at), err)
			}
		}
		clear(jobs) // drop references to p and the parts
		if stopErr != nil {
			return stop, stopErr
		}
	}
	// A partial last page.
	if n < len(p) {
		a := paddr + uint64(n)
		if a < paddr {
			return n, memory.Fault(a, memory.SpacePhysical, "address wraps", memory.ErrNotSaved)
		}
		pg, err := d.page(a >> d.shift)
		if err != nil {
			return n, fault(a, err)
		}
		n += copy(p[n:], pg)
	}
	return n, nil
}

// readSpans reads the data of jobs whose pages lie back to back in a file
// with one read per run instead of one per page: a run of raw pages whose
// places in the read are back to back too straight into them, a run of
// compressed pages into d.span for the decoders. A run whose read fails is
// left to its jobs, each reading its own page, so that every page's error
// is the one a read of that page alone gives (all on the deb13-6.12-amd64
// raw kdump: 2,480 -> 331 preads, wall median 42.8 -> 39.9 ms). The caller
// holds d.mu.
func (d *Dump) readSpans(jobs []pageJob) {
	need := 0
	for i := range jobs {
		if jobs[i].pd.flags&pageCompressed != 0 {
			need += int(jobs[i].pd.size)
		}
	}
	if cap(d.span) < need {
		d.span = make([]byte, need)
	}
	free := d.span[:need]
	for i := 0; i < len(jobs); {
		first := &jobs[i]
		raw := first.pd.flags&pageCompressed == 0
		size := first.pd.size
		j := i + 1
		for ; j < len(jobs); j++ {
			prev, next := &jobs[j-1], &jobs[j]
			if next.p != first.p || next.pd.off != prev.pd.off+prev.pd.size || (next.pd.flags&pageCompressed == 0) != raw {
				break
			}
			if raw && (next.at != prev.at+len(prev.dst) || checkDesc(next.pd, len(next.dst), next.pfn) != nil) {
				break
			}
			size += next.pd.size
		}
		run := jobs[i:j]
		i = j
		if len(run) < 2 {
			continue
		}
		if raw {
			if checkDesc(first.pd, len(first.dst), first.pfn) != nil {
				continue
			}
			if _, err := first.p.r.ReadAt(first.dst[:size:size], first.pd.off); err == nil {
				for k := range run {
					run[k].done = true
				}
			}
			continue
		}
		buf := free[:size:size]
		if _, err := first.p.r.ReadAt(buf, first.pd.off); err != nil {
			continue
		}
		free = free[size:]
		for k := range run {
			run[k].src, buf = buf[:run[k].pd.size], buf[run[k].pd.size:]
		}
	}
}

// loadJob decodes job j's page with dec: from what readSpans read, or
// reading it alone.
func loadJob(dec *decoders, j *pageJob) error {
	switch {
	case j.done:
		return nil
	case j.src != nil:
		return dec.decodeFrom(j.dst, j.src, j.pd, j.pfn)
	}
	return dec.load(j.dst, j.p.r, j.pd, j.pfn)
}

// markSame finds the jobs whose page has the data of an earlier job's:
// one stored page shared by many pfns, as QEMU's kdump files and
// makedumpfile below dump level 1 store every zero page. Such a job is
// decoded by copying the earlier one's (decodeJobs), not read again: on
// the regenerated deb13-6.12-riscv64 QEMU kdump file, whose VMCOREINFO
// scan reads 79,265 zero pages, one read per batch of 256 pages instead of
// one per zero page.
func markSame(jobs []pageJob) {
	// Distinct pages are stored in pfn order, at rising offsets: a batch
	// whose data offsets only rise shares nothing, and needs no map.
	prev, rising := int64(-1), true
	for i := range jobs {
		if j := &jobs[i]; !j.done {
			if j.pd.off <= prev {
				rising = false
				break
			}
			prev = j.pd.off
		}
	}
	if rising {
		return
	}
	type stored struct {
		p     *part
		off   int64
		size  int64
		flags uint32
	}
	var first map[stored]int
	for i := range jobs {
		j := &jobs[i]
		if j.done {
			continue
		}
		if first == nil {
			first = make(map[stored]int, len(jobs))
		}
		k := stored{j.p, j.pd.off, j.pd.size, j.pd.flags}
		if f, ok := first[k]; ok {
			j.same = f + 1
			continue
		}
		first[k] = i
	}
}

// decodeJobs decodes the pages of jobs, each into its dst, recording each
// page's error in its job. The caller holds d.mu.
func (d *Dump) decodeJobs(jobs []pageJob) {
	d.readSpans(jobs)
	markSame(jobs)
	defer func() {
		// A page with another's data is that page's bytes; if that one
		// failed, it is decoded alone, so that its error names it.
		for i := range jobs {
			j := &jobs[i]
			if j.same == 0 {
				continue
			}
			if f := &jobs[j.same-1]; f.err == nil {
				copy(j.dst, f.dst)
			} else {
				j.err = loadJob(&d.dec, j)
			}
		}
	}()
	workers := min(runtime.GOMAXPROCS(0), maxWorkers, len(jobs)/pagesPerWorker)
	if workers <= 1 {
		for i := range jobs {
			if j := &jobs[i]; j.same == 0 {
				j.err = loadJob(&d.dec, j)
			}
		}
		return
	}
	for len(d.more) < workers-1 {
		d.more = append(d.more, &decoders{})
	}
	var wg sync.WaitGroup
	for w := range workers {
		dec := &d.dec
		if w > 0 {
			dec = d.more[w-1]
		}
		lo, hi := w*len(jobs)/workers, (w+1)*len(jobs)/workers
		run := func() {
			for i := lo; i < hi; i++ {
				if j := &jobs[i]; j.same == 0 {
					j.err = loadJob(dec, j)
				}
			}
		}
		if w == workers-1 {
			run()
			break
		}
		wg.Go(run)
	}
	wg.Wait()
}

// RawPage returns the page descriptor flags and the bytes stored for the
// page at physical page frame number pfn, uncompressed or not as stored.
// Absent pages fail with an error wrapping memory.ErrNotSaved; bad
// descriptors with a *FormatError.
func (d *Dump) RawPage(pfn uint64) (flags uint32, data []byte, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pd, p, err := d.descriptor(pfn)
	if err != nil {
		return 0, nil, err
	}
	data = make([]byte, pd.size)
	if _, err := p.r.ReadAt(data, pd.off); err != nil {
		return 0, nil, dataErr(pfn, pd, err)
	}
	return pd.flags, data, nil
}

type pageDesc struct {
	off   int64
	size  int64
	flags uint32
}

// descriptor finds and checks the page descriptor of physical pfn. The
// caller holds d.mu.
func (d *Dump) descriptor(ppfn uint64) (pageDesc, *part, error) {
	if ppfn < d.hdr.PFNOffset {
		return pageDesc{}, nil, fmt.Errorf("pfn %#x below the first pfn of the dump: %w", ppfn, errExcluded)
	}
	pfn := ppfn - d.hdr.PFNOffset
	p := d.partFor(pfn)
	if p == nil || pfn >= d.hdr.MaxMapnr {
		return pageDesc{}, nil, fmt.Errorf("pfn %#x not in any dump file: %w", ppfn, errExcluded)
	}
	idx, ok := p.bm.rank(pfn)
	if !ok {
		return pageDesc{}, nil, errExcluded
	}
	incomplete := p.ph.h.Incomplete()
	doff := p.ph.descOff + int64(idx)*pageDescSize
	raw, err := d.desc.at(p, doff)
	if err != nil {
		if err == io.EOF && incomplete {
			return pageDesc{}, nil, fmt.Errorf("pfn %#x: descriptor lost, dump incomplete: %w", ppfn, memory.ErrNotSaved)
		}
		if err == io.EOF {
			return pageDesc{}, nil, formatErr(doff, ppfn, "page descriptor for pfn %#x beyond end of file", ppfn)
		}
		return pageDesc{}, nil, fmt.Errorf("diskdump: page descriptor for pfn %#x at %#x: %w", ppfn, doff, err)
	}
	bo := p.ph.h.ByteOrder
	pd := pageDesc{
		off:   int64(bo.Uint64(raw[0:])),
		size:  int64(bo.Uint32(raw[8:])),
		flags: bo.Uint32(raw[12:]),
	}
	if pd.off <= 0 || pd.off > p.size || pd.size > p.size-pd.off {
		if incomplete {
			return pageDesc{}, nil, fmt.Errorf("pfn %#x: page lost, dump incomplete: %w", ppfn, memory.ErrNotSaved)
		}
		return pageDesc{}, nil, formatErr(doff, uint64(pd.off), "page descriptor for pfn %#x: data offset outside the file", ppfn)
	}
	if pd.size == 0 || pd.size > int64(d.hdr.BlockSize) {
		return pageDesc{}, nil, formatErr(doff+8, uint64(pd.size), "page descriptor for pfn %#x: bad size", ppfn)
	}
	return pd, p, nil
}

// descBlockLen is how many page descriptors one read of the table
// fetches: the pages of a large read (a kallsyms or BTF table) are
// consecutive in the table, so one read serves the next 255 pages instead
// of one read of 24 bytes each (all on the deb13-6.12-amd64 raw kdump:
// 4,776 -> 2,480 preads, wall median 47.9 -> 46.2 ms).
const descBlockLen = 256

// descBlock keeps the last block of page descriptors read. The caller
// holds the Dump's mutex.
type descBlock struct {
	p     *part
	start int64 // file offset of buf[0]
	buf   []byte
	one   [pageDescSize]byte
}

// at returns the pageDescSize bytes at file offset off of p's descriptor
// table: from the block when it holds them, else from a new block read
// from off. A block cut short by the end of the file keeps what was read;
// a descriptor the block cannot give whole is read alone, so that its
// error is that of a read of exactly those bytes.
func (b *descBlock) at(p *part, off int64) ([]byte, error) {
	if b.p == p && off >= b.start && off-b.start+pageDescSize <= int64(len(b.buf)) {
		return b.buf[off-b.start:][:pageDescSize], nil
	}
	if b.buf == nil {
		b.buf = make([]byte, descBlockLen*pageDescSize)
	}
	b.buf = b.buf[:cap(b.buf)]
	n, _ := p.r.ReadAt(b.buf, off)
	if n >= pageDescSize {
		b.p, b.start, b.buf = p, off, b.buf[:n]
		return b.buf[:pageDescSize], nil
	}
	b.p, b.buf = nil, b.buf[:0]
	if _, err := p.r.ReadAt(b.one[:], off); err != nil {
		return nil, err
	}
	return b.one[:], nil
}

// page returns the decompressed page for physical pfn, from the cache or
// the file. The caller holds d.mu; the slice is valid until the next call.
func (d *Dump) page(pfn uint64) ([]byte, error) {
	if buf, ok := d.cache.get(pfn); ok {
		return buf, nil
	}
	pd, p, err := d.descriptor(pfn)
	if err != nil {
		return nil, err
	}
	dst := d.cache.slot(pfn)
	if err := d.dec.load(dst, p.r, pd, pfn); err != nil {
		d.cache.drop(pfn)
		return nil, err
	}
	return dst, nil
}

// Compressions counts the page descriptors of every saved page by codec:
// "raw", "zlib", "lzo", "snappy", "zstd", "unknown", and "lost" for pages
// an incomplete dump never wrote. It reads the whole descriptor table, so
// it costs I/O proportional to the number of saved pages. Descriptors that
// cannot be read (an I/O error) are counted as "unreadable".
func (d *Dump) Compressions() map[string]int {
	out := map[string]int{}
	buf := make([]byte, 4096*pageDescSize)
	for _, p := range d.parts {
		bo := p.ph.h.ByteOrder
		left := p.bm.count
		off := p.ph.descOff
		for left > 0 {
			k := min(left, uint64(len(buf)/pageDescSize))
			b := buf[:k*pageDescSize]
			n, err := p.r.ReadAt(b, off)
			lost := "lost"
			if err != nil && !(err == io.EOF && p.ph.h.Incomplete()) {
				lost = "unreadable"
			}
			for i := 0; i+pageDescSize <= n; i += pageDescSize {
				if o, n := int64(bo.Uint64(b[i:])), int64(bo.Uint32(b[i+8:])); o <= 0 || o > p.size || n > p.size-o {
					out["lost"]++
					continue
				}
				out[codecName(bo.Uint32(b[i+12:]))]++
			}
			if n < len(b) {
				out[lost] += int(left) - n/pageDescSize
				break
			}
			left -= k
			off += int64(len(b))
		}
	}
	return out
}
