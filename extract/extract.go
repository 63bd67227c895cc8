package extract

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/diskdump"
	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Options adjust Extract.
type Options struct {
	// Session opens and decodes the input; its Dump.WrapPhysical is
	// replaced by the recorder.
	Session kdumpsyms.Options
	// Format is "" to keep the input's container (ELF, kdump-compressed,
	// flattened, split into as many files) or "elf" to write an ELF core.
	Format string
	// Keep adds ranges to what decoding reads.
	Keep []Range
	// Force replaces existing output files.
	Force bool
}

// Result says what Extract kept and wrote.
type Result struct {
	Consumers []Consumer
	// Saved[i] is how many of Consumers[i].Pages the input holds: the
	// pages written for that consumer.
	Saved []int
	// Pages is the number of pages written; NotSaved the pages read that
	// the input does not hold (decoders probe, and filtered dumps lack
	// pages).
	Pages, NotSaved int
	PageSize        int
	Format          string   // the output's container: "elf", "kdump", "kdump-flattened", "kdump-split"
	Files           []string // the files written, in part order
	Bytes           int64    // their total size
}

// ErrExists is returned when an output file exists and Options.Force is
// not set.
var ErrExists = errors.New("output file exists (use --force to replace it)")

// OutputFiles returns the files Extract writes for out: out itself, or
// out.1 … out.N for a split set of n parts.
func OutputFiles(out string, parts int) []string {
	if parts <= 1 {
		return []string{out}
	}
	var fs []string
	for i := 1; i <= parts; i++ {
		fs = append(fs, out+"."+strconv.Itoa(i))
	}
	return fs
}

// Extract decodes the dump in paths (see Record), adds opt.Keep, and writes
// the pages read to out (out.1 … out.N for a split set). Each file is
// written to a temporary file in its directory, synced and renamed into
// place only when everything succeeded; on error no output file is left.
// An existing output fails with ErrExists unless opt.Force is set.
//
// Errors name the input file: those of Record, and of reading its pages
// (a *diskdump.FormatError or *memory.FaultError for corrupt data).
func Extract(out string, paths []string, opt Options) (*Result, error) {
	if opt.Format != "" && opt.Format != "elf" {
		return nil, fmt.Errorf("extract: output format %q: only elf, or the input's own", opt.Format)
	}
	if !opt.Force {
		// Fail early; the final link checks again.
		for _, f := range OutputFiles(out, len(paths)) {
			if _, err := os.Lstat(f); err == nil {
				return nil, fmt.Errorf("extract: %s: %w", f, ErrExists)
			}
		}
	}
	sel, err := Record(opt.Session, paths...)
	if err != nil {
		return nil, err
	}
	defer sel.Close()
	if err := sel.Keep(opt.Keep); err != nil {
		return nil, err
	}
	res, err := sel.write(out, paths[0], opt)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// write writes the selection.
func (s *Selection) write(out, input string, opt Options) (*Result, error) {
	d := s.Session.Dump()
	res := &Result{Consumers: s.Consumers, PageSize: 1 << s.PageShift}
	wrapErr := func(err error) error { return fmt.Errorf("extract: %s: %w", input, err) }
	pages := s.Pages()
	var (
		nfiles int
		emit   func(ws []io.Writer) ([]int64, error)
		saved  func(pfn uint64) bool
	)
	kd := d.Kdump()
	if kd != nil {
		// Read every kept page's stored blob now: it tells which pages
		// the dump holds, and corrupt descriptors fail before any file
		// is created.
		type blob struct {
			flags uint32
			data  []byte
		}
		blobs := map[uint64]blob{}
		var keep []uint64
		for _, pfn := range pages {
			flags, data, err := kd.RawPage(pfn)
			if errors.Is(err, memory.ErrNotSaved) {
				continue
			}
			if err != nil {
				return nil, wrapErr(err)
			}
			blobs[pfn] = blob{flags, data}
			keep = append(keep, pfn)
		}
		saved = func(pfn uint64) bool { _, ok := blobs[pfn]; return ok }
		h := kd.Header()
		if opt.Format == "elf" {
			res.Format = "elf"
			nfiles = 1
			segs := runs(keep, s.PageShift)
			e := &ELF{
				ByteOrder: d.Arch().ByteOrder,
				Machine:   d.Arch().ELFMachine(),
				Notes:     kd.Notes(),
				Segments:  segs,
				Mem:       kd,
			}
			if len(e.Notes) == 0 && len(kd.VMCOREINFO()) > 0 {
				e.Notes = BuildNotes(e.ByteOrder, []Note{{Name: "VMCOREINFO", Desc: kd.VMCOREINFO()}})
			}
			emit = func(ws []io.Writer) ([]int64, error) {
				n, err := WriteELF(ws[0], e)
				return []int64{n}, err
			}
		} else {
			k := &Kdump{
				Header:     h,
				VMCOREINFO: kd.VMCOREINFO(),
				Notes:      kd.Notes(),
				EraseInfo:  kd.EraseInfo(),
				Pages:      keep,
				Exists:     kd.SavedPFNs(),
				Page: func(pfn uint64) (uint32, []byte, error) {
					b := blobs[pfn]
					return b.flags, b.data, nil
				},
			}
			res.Format = "kdump"
			if h.Split || len(h.Parts) > 1 {
				res.Format = "kdump-split"
				for _, p := range h.Parts {
					k.Parts = append(k.Parts, PFNRange{p.StartPFN, p.EndPFN})
				}
			} else if h.Flattened {
				res.Format = "kdump-flattened"
			}
			nfiles = max(1, len(k.Parts))
			emit = func(ws []io.Writer) ([]int64, error) {
				was := make([]io.WriterAt, len(ws))
				flats := make([]*FlatWriter, len(ws))
				for i, w := range ws {
					if h.Flattened {
						flats[i] = NewFlatWriter(w)
						was[i] = flats[i]
					} else {
						was[i] = w.(io.WriterAt)
					}
				}
				if err := WriteKdump(was, k); err != nil {
					return nil, err
				}
				for _, f := range flats {
					if f != nil {
						if err := f.Close(); err != nil {
							return nil, err
						}
					}
				}
				return nil, nil
			}
		}
	} else if ef := d.ELFCore(); ef != nil {
		res.Format = "elf"
		nfiles = 1
		e := &ELF{
			ByteOrder: ef.ByteOrder(),
			Machine:   ef.Machine(),
			Flags:     ef.Flags() &^ elfcore.DumpELFIncomplete,
			Notes:     BuildNotes(ef.ByteOrder(), notesOf(ef)),
			Mem:       ef.Physical(),
		}
		e.Segments = elfSegments(ef.Segments(), pages, s.PageShift)
		inFile := map[uint64]bool{}
		for _, sg := range e.Segments {
			for p := sg.Paddr >> s.PageShift; p<<s.PageShift < sg.Paddr+sg.Memsz; p++ {
				inFile[p] = true
			}
		}
		saved = func(pfn uint64) bool { return inFile[pfn] }
		emit = func(ws []io.Writer) ([]int64, error) {
			n, err := WriteELF(ws[0], e)
			return []int64{n}, err
		}
	} else if mi := d.MemImage(); mi != nil {
		// A memory image has no container of its own to copy: write an
		// ELF core of the pages read, with the architecture (which the
		// image does not record) and the VMCOREINFO used as its note, so
		// the extract opens without --arch or a scan.
		res.Format = "elf"
		nfiles = 1
		phys := mi.Physical()
		var keep []uint64
		var probe [1]byte
		for _, pfn := range pages {
			if _, err := phys.ReadAt(probe[:], pfn<<s.PageShift); errors.Is(err, memory.ErrNotSaved) {
				continue
			} else if err != nil {
				return nil, wrapErr(err)
			}
			keep = append(keep, pfn)
		}
		inFile := map[uint64]bool{}
		for _, pfn := range keep {
			inFile[pfn] = true
		}
		saved = func(pfn uint64) bool { return inFile[pfn] }
		e := &ELF{
			ByteOrder: d.Arch().ByteOrder,
			Machine:   d.Arch().ELFMachine(),
			Segments:  runs(keep, s.PageShift),
			Mem:       phys,
		}
		if text := d.VMCOREINFO(); len(text) > 0 {
			e.Notes = BuildNotes(e.ByteOrder, []Note{{Name: "VMCOREINFO", Desc: text}})
		}
		emit = func(ws []io.Writer) ([]int64, error) {
			n, err := WriteELF(ws[0], e)
			return []int64{n}, err
		}
	} else {
		return nil, fmt.Errorf("extract: %s: container %q: %w", input, d.Format(), errors.ErrUnsupported)
	}

	for _, c := range s.Consumers {
		n := 0
		for _, p := range c.Pages {
			if saved(p) {
				n++
			}
		}
		res.Saved = append(res.Saved, n)
		res.Pages += n
	}
	res.NotSaved = len(pages) - res.Pages
	res.Files = OutputFiles(out, nfiles)
	n, err := writeFiles(res.Files, opt.Force, emit)
	if err != nil {
		var fe *diskdump.FormatError
		var me *memory.FaultError
		if errors.As(err, &fe) || errors.As(err, &me) {
			err = wrapErr(err)
		}
		return nil, err
	}
	res.Bytes = n
	return res, nil
}

func notesOf(ef *elfcore.File) []Note {
	var out []Note
	for _, n := range ef.Notes() {
		out = append(out, Note{Name: n.Name, Type: n.Type, Desc: n.Desc})
	}
	return out
}

// runs turns sorted page frame numbers into one segment per run of
// consecutive pages, with p_vaddr = p_paddr (QEMU's convention for "no
// virtual address").
func runs(pfns []uint64, shift uint) []ELFSegment {
	var out []ELFSegment
	for i := 0; i < len(pfns); {
		j := i + 1
		for j < len(pfns) && pfns[j] == pfns[j-1]+1 {
			j++
		}
		start, size := pfns[i]<<shift, uint64(j-i)<<shift
		out = append(out, ELFSegment{Paddr: start, Vaddr: start, Filesz: size, Memsz: size})
		i = j
	}
	return out
}

// elfSegments intersects the input's PT_LOADs with the kept pages: one
// segment per run of kept pages within each input segment, with p_vaddr
// kept at the same offset, and the part beyond the input's p_filesz kept
// as a zero-filled tail. Overlapping input segments (the kernel-text and
// RAM segments of /proc/vmcore) each keep their pages, so the kernel-text
// segment still tells readers phys_base.
func elfSegments(in []elfcore.Segment, pages []uint64, shift uint) []ELFSegment {
	var out []ELFSegment
	ps := uint64(1) << shift
	for _, sg := range in {
		if sg.Memsz == 0 || sg.Paddr == ^uint64(0) || sg.Paddr+sg.Memsz < sg.Paddr {
			continue
		}
		end := sg.Paddr + sg.Memsz
		dataEnd := sg.Paddr + sg.Filesz
		i, _ := slices.BinarySearch(pages, sg.Paddr>>shift)
		for i < len(pages) && pages[i]<<shift < end {
			j := i + 1
			for j < len(pages) && pages[j] == pages[j-1]+1 && pages[j]<<shift < end {
				j++
			}
			a := max(pages[i]<<shift, sg.Paddr)
			b := min(pages[j-1]<<shift+ps, end)
			fs := uint64(0)
			if dataEnd > a {
				fs = min(dataEnd, b) - a
			}
			out = append(out, ELFSegment{Paddr: a, Vaddr: sg.Vaddr + (a - sg.Paddr), Filesz: fs, Memsz: b - a, Flags: sg.Flags})
			i = j
		}
	}
	return out
}

// writeFiles creates a temporary file beside each final name, lets emit
// write them, syncs them and moves them into place: with rename when force
// is set, else with a hard link that fails when the name exists. On any
// error every temporary file, and every final file this call created, is
// removed.
func writeFiles(finals []string, force bool, emit func([]io.Writer) ([]int64, error)) (total int64, err error) {
	tmps := make([]*os.File, 0, len(finals))
	var placed []string
	defer func() {
		for _, f := range tmps {
			f.Close()
			os.Remove(f.Name())
		}
		if err != nil {
			for _, p := range placed {
				os.Remove(p)
			}
		}
	}()
	ws := make([]io.Writer, len(finals))
	for i, fin := range finals {
		f, err := os.CreateTemp(filepath.Dir(fin), "."+filepath.Base(fin)+".tmp-*")
		if err != nil {
			return 0, fmt.Errorf("extract: %w", err)
		}
		tmps = append(tmps, f)
		ws[i] = f
	}
	if _, err := emit(ws); err != nil {
		return 0, err
	}
	for _, f := range tmps {
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("extract: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			return 0, fmt.Errorf("extract: %w", err)
		}
		total += st.Size()
	}
	for i, f := range tmps {
		if err := os.Chmod(f.Name(), 0o644); err != nil {
			return 0, fmt.Errorf("extract: %w", err)
		}
		if force {
			if err := os.Rename(f.Name(), finals[i]); err != nil {
				return 0, fmt.Errorf("extract: %w", err)
			}
		} else {
			if err := os.Link(f.Name(), finals[i]); err != nil {
				if errors.Is(err, os.ErrExist) {
					return 0, fmt.Errorf("extract: %s: %w", finals[i], ErrExists)
				}
				return 0, fmt.Errorf("extract: %w", err)
			}
		}
		placed = append(placed, finals[i])
	}
	return total, nil
}
