package extract

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// recordShift is the granule the recorder works in: 4 KiB, the smallest
// page size of the architectures read. Pages are converted to the dump's
// page size when the selection is made.
const recordShift = 12

// Range is a range of addresses [Start, End) to keep besides what decoding
// reads: physical, or kernel virtual (translated page by page).
type Range struct {
	Virtual    bool
	Start, End uint64
}

// ParseRange parses "p:0xSTART-0xEND" (physical) or "v:0xSTART-0xEND"
// (kernel virtual); END is exclusive. Numbers are hex with or without 0x.
func ParseRange(s string) (Range, error) {
	var r Range
	space, rest, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return r, fmt.Errorf("range %q: want p:START-END or v:START-END", s)
	case space == "p":
	case space == "v":
		r.Virtual = true
	default:
		return r, fmt.Errorf("range %q: address space %q is neither p (physical) nor v (kernel virtual)", s, space)
	}
	a, b, ok := strings.Cut(rest, "-")
	if !ok {
		return r, fmt.Errorf("range %q: want START-END", s)
	}
	var err1, err2 error
	r.Start, err1 = parseHex(a)
	r.End, err2 = parseHex(b)
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("range %q: %w", s, err)
	}
	if r.End <= r.Start {
		return r, fmt.Errorf("range %q: end is not above start", s)
	}
	return r, nil
}

func parseHex(s string) (uint64, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	return strconv.ParseUint(s, 16, 64)
}

func (r Range) String() string {
	sp := "p"
	if r.Virtual {
		sp = "v"
	}
	return fmt.Sprintf("%s:%#x-%#x", sp, r.Start, r.End)
}

// Consumer is one stage of decoding and the pages it read first.
type Consumer struct {
	// Name is "vmcoreinfo", "translation", "kallsyms", "btf", "modules",
	// "finders" or "keep".
	Name string
	// Pages are the page frame numbers (in the dump's page size) this
	// consumer read before any later one, in increasing order, whether or
	// not the dump holds them.
	Pages []uint64
	// Err is why the consumer failed, if it did; what it read until then
	// is kept.
	Err error
}

// Selection is an open dump and the pages decoding read from it.
type Selection struct {
	Session   *kdumpsyms.Session
	Consumers []Consumer
	// PageShift is log2 of the dump's page size; page frame numbers are in
	// that unit.
	PageShift uint

	rec  *memory.Recorder
	seen map[uint64]bool
}

// Close closes the session.
func (s *Selection) Close() error { return s.Session.Close() }

// Pages returns every page frame number read or asked for, in increasing
// order, whether or not the dump holds it.
func (s *Selection) Pages() []uint64 {
	return slices.Sorted(maps.Keys(s.seen))
}

// Record opens the dump in paths with opt, decodes everything (the
// session's Stages: the kernel address space, kallsyms, BTF and modules,
// then every finder's All; then the kernel log, each CPU's stack, the
// task list and the page tables that map the module symbols), and returns
// the pages each stage read. Stages that fail are reported in their Consumer's Err and
// the others still run, except that a failure caused by corrupt data
// (memory.ErrCorrupt) in one of the session's stages is returned as the
// error: an extract must not silently lose what a reader of the full dump
// would report. Errors of opening the dump are those of kdumpsyms.Open,
// which name the file.
func Record(opt kdumpsyms.Options, paths ...string) (*Selection, error) {
	var rec *memory.Recorder
	opt.Dump.WrapPhysical = func(r memory.Reader) memory.Reader {
		rec = memory.NewRecorder(r, recordShift)
		return rec
	}
	sess, err := kdumpsyms.Open(opt, paths...)
	if err != nil {
		return nil, err
	}
	d := sess.Dump()
	ps := d.PageSize()
	if kd := d.Kdump(); kd != nil {
		// A kdump file numbers its pages in its block size, which need
		// not be the kernel's: QEMU writes arm64 guests' dumps in 64 KiB
		// blocks whatever the guest's page size.
		ps = int(kd.Header().BlockSize)
	}
	if ps == 0 || ps&(ps-1) != 0 || rec == nil {
		sess.Close()
		return nil, fmt.Errorf("extract: %s: page size %d", paths[0], ps)
	}
	sel := &Selection{Session: sess, PageShift: uint(bits.TrailingZeros(uint(ps))), rec: rec, seen: map[uint64]bool{}}

	// A VMCOREINFO found by scanning memory: keep the note's pages, not the
	// megabytes scanned before it.
	rec.Reset()
	var vmci Consumer
	vmci.Name = "vmcoreinfo"
	if o := d.InfoOrigin(); o.InMemory() {
		sel.addPhys(o.Addr, o.Addr+uint64(12+12+len(d.VMCOREINFO())+8))
		if o.Kind == vmcore.InfoS390Lowcore {
			sel.addPhys(0xe0c, 0xe14)
		}
	}
	vmci.Pages = sel.snapshot()
	sel.Consumers = append(sel.Consumers, vmci)

	stage := func(name string, f func() error) error {
		err := f()
		sel.Consumers = append(sel.Consumers, Consumer{Name: name, Pages: sel.snapshot(), Err: err})
		if err != nil && errors.Is(err, memory.ErrCorrupt) {
			// Each stage's errors name their source (kallsyms:, vmcore:
			// kernel address space:, kdumpsyms: modules:, symfinder:
			// bpf:, ...); of the finders' joined failures, the first
			// corrupt one stops the extract, said on one line.
			return fmt.Errorf("extract: %s: %w", paths[0], firstCorrupt(err))
		}
		return nil
	}
	fail := func(err error) (*Selection, error) {
		sess.Close()
		return nil, err
	}
	// The session's own stages, in its order, with what the extract
	// adds after two of them.
	for _, st := range sess.Stages() {
		if err := stage(st.Name, st.Run); err != nil {
			return fail(err)
		}
		switch st.Name {
		case kdumpsyms.StageKallsyms:
			if k, err := sess.Kallsyms(); err == nil && k.Layout.Source == kallsyms.SourceScan {
				sel.trimScan(&k.Layout, opt.Kallsyms)
			}
			if k, err := sess.Kallsyms(); err == nil {
				sel.keepTables(&k.Layout)
			}
			sel.keepNote(opt.Dump.ScanLimit)
		case kdumpsyms.StageModules:
			sel.splitBTF()
		}
	}
	// The kernel log, so that dmesg reads from the extract what it reads
	// from the original.
	stage("printk", func() error {
		l, err := sess.Log()
		if err != nil {
			return err
		}
		for range l.Entries() {
		}
		return nil
	})
	// Each CPU's stack (and, on x86_64, the ORC entries the walk looks up),
	// so that panic unwinds on the extract as on the original.
	stage("stacks", func() error {
		for _, c := range d.CPUs() {
			sess.Unwind(c.Regs)
		}
		// 32-bit ARM: the modules' unwind tables too (the kernel's
		// unwind_tables list), which a walk that stays in vmlinux does
		// not read, so that a module frame unwinds on the extract.
		if d.Arch().Name == "arm" {
			if t, _, err := sess.ARMTables(); err == nil && t.LoadModules != nil {
				t.LoadModules()
			}
		}
		return nil
	})
	// Every task (kdump-syms ps) and its stack (bt), so that they read on
	// the extract as on the original. Like the stacks, best effort: a dump
	// whose layouts lack task_struct (no BTF) has no task list to keep,
	// and ps on the extract reports what it reports on the original.
	stage("tasks", func() error {
		list, err := sess.Tasks()
		if err != nil {
			return nil
		}
		// And each task's stack (kdump-syms bt), on the architectures
		// it is unwound on.
		for i := range list.Tasks {
			sess.TaskStack(&list.Tasks[i])
		}
		return nil
	})
	// The page tables that map every module, BPF and trampoline symbol, so
	// that the extract translates each symbol's address as the original
	// does (vmlinux symbols are in the kernel-text map, which needs none).
	stage("page tables", func() error {
		t, err := d.Translator()
		if err != nil {
			return nil
		}
		for sym, err := range sess.Chain().All() {
			if err == nil && sym.Module != "" {
				t.Translate(sym.Addr)
			}
		}
		return nil
	})
	return sel, nil
}

// firstCorrupt returns the first error in err's tree of joined errors
// that is corrupt data, or err itself.
func firstCorrupt(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if errors.Is(e, memory.ErrCorrupt) {
				return firstCorrupt(e)
			}
		}
	}
	return err
}

// snapshot returns the pages the recorder saw since the last snapshot and
// not before, in dump pages, and marks them seen.
func (s *Selection) snapshot() []uint64 {
	var out []uint64
	for _, p := range s.rec.Pages() {
		first, last := s.toDumpPages(p)
		for pfn := first; pfn <= last; pfn++ {
			if !s.seen[pfn] {
				s.seen[pfn] = true
				out = append(out, pfn)
			}
		}
	}
	s.rec.Reset()
	slices.Sort(out)
	return slices.Compact(out)
}

// toDumpPages converts a recorder page to the dump pages it overlaps.
func (s *Selection) toDumpPages(p uint64) (first, last uint64) {
	if s.PageShift >= recordShift {
		q := p >> (s.PageShift - recordShift)
		return q, q
	}
	d := recordShift - s.PageShift
	return p << d, p<<d | (1<<d - 1)
}

// addPhys records the pages of [start, end) as read.
func (s *Selection) addPhys(start, end uint64) {
	if end <= start {
		return
	}
	for p := start >> recordShift; p <= (end-1)>>recordShift; p++ {
		var b [1]byte
		s.rec.ReadAt(b[:], p<<recordShift) // records the page; absence is fine
	}
}

// keepTables reads every kallsyms table whole, so that the extract serves
// every way of decoding them (expanded or lazy, by address or by name, with
// kallsyms_seqs_of_names), not only the one Record used.
func (s *Selection) keepTables(l *kallsyms.Layout) {
	kmem, err := s.Session.Kernel()
	if err != nil {
		return
	}
	buf := make([]byte, 1<<16)
	for _, r := range l.Regions() {
		if r.Addr == 0 {
			continue
		}
		n := max(r.Size, 8)
		for off := uint64(0); off < n; off += uint64(len(buf)) {
			kmem.ReadAt(buf[:min(uint64(len(buf)), n-off)], r.Addr+off) // recorded; errors are the decoder's to report
		}
	}
	ci := len(s.Consumers) - 1
	s.Consumers[ci].Pages = append(s.Consumers[ci].Pages, s.snapshot()...)
	slices.Sort(s.Consumers[ci].Pages)
}

// keepNote keeps the VMCOREINFO note in memory and adds its pages to the
// "vmcoreinfo" consumer: readers that look for the note in memory (a dump
// whose container lost it, or vmcore.Options.ForceScan) find it in the
// extract where they found it in the original. The note is found through
// the kernel's vmcoreinfo_note (a pointer to the note since v4.15, the
// note itself before), else, without that symbol (a kernel without
// CONFIG_KALLSYMS_ALL), where the dump's VMCOREINFO was found in memory,
// else by the scan vmcore does (vmcore.Dump.FindVMCOREINFONote, bounded
// by scanLimit as vmcore.Options.ScanLimit bounds it), whose reads before
// the note are not kept.
func (s *Selection) keepNote(scanLimit int64) {
	d := s.Session.Dump()
	text := d.VMCOREINFO()
	arch := d.Arch()
	if len(text) == 0 || arch.ByteOrder == nil {
		return
	}
	const hdr = 12 + 12 // note header, "VMCOREINFO\0" padded to 4
	// The whole buffer the kernel allocated (VMCOREINFO_NOTE_SIZE: the
	// header, a page of text, an empty closing note), as
	// /sys/kernel/vmcoreinfo gives it; at least the text. The page is the
	// kernel's, not the dump's block (64 KiB in QEMU's arm64 kdump files).
	body := make([]byte, max(len(text), d.PageSize())+12)
	defer func() {
		s.Consumers[0].Pages = append(s.Consumers[0].Pages, s.snapshot()...)
		slices.Sort(s.Consumers[0].Pages)
	}()
	if at, ok := s.noteBySymbol(hdr); ok {
		kmem, _ := s.Session.Kernel()
		memory.ReadFull(kmem, body, at+hdr) // recorded; the pages are what matters
		return
	}
	s.rec.Reset() // what was probed is not worth keeping
	o := d.InfoOrigin()
	at, ok := o.Addr, o.InMemory()
	if !ok {
		at, ok = d.FindVMCOREINFONote(scanLimit)
		s.rec.Reset() // nor the megabytes scanned before the note
		if !ok {
			return
		}
		if arch.Name == "s390x" || arch.Name == "s390" {
			s.addPhys(0xe0c, 0xe14) // the lowcore's pointer, which found it
		}
	}
	memory.ReadFull(d.Physical(), body[:hdr], at)
	memory.ReadFull(d.Physical(), body, at+hdr)
}

// noteBySymbol returns the kernel virtual address of the VMCOREINFO note
// through the kernel's vmcoreinfo_note, if kallsyms has that symbol.
func (s *Selection) noteBySymbol(hdr int) (uint64, bool) {
	// Ask kallsyms alone: a lookup through the chain would load the
	// module finder here (the symbol is absent without KALLSYMS_ALL), and
	// the reset below would drop the pages it read.
	k, err := s.Session.Kallsyms()
	kmem, kerr := s.Session.Kernel()
	arch := s.Session.Dump().Arch()
	if err != nil || kerr != nil {
		return 0, false
	}
	var sym symfinder.Symbol
	found := false
	_ = k.Finder().Find(symfinder.Query{Kind: symfinder.ByName, Name: "vmcoreinfo_note"}, func(s symfinder.Symbol) bool {
		sym, found = s, true
		return false
	})
	if !found {
		return 0, false
	}
	isNote := func(at uint64) bool {
		b := make([]byte, hdr)
		if memory.ReadFull(kmem, b, at) != nil {
			return false
		}
		return arch.ByteOrder.Uint32(b[0:]) == 11 && arch.ByteOrder.Uint32(b[8:]) == 0 && string(b[12:22]) == "VMCOREINFO"
	}
	if isNote(sym.Addr) {
		return sym.Addr, true
	}
	p, err := arch.ReadPointer(kmem, sym.Addr)
	if err != nil || !isNote(p) {
		return 0, false
	}
	return p, true
}

// trimScan drops from the "kallsyms" consumer the pages of the kernel image
// that a scan for the tables (kernels before 6.0, whose VMCOREINFO does not
// name them) read without finding them: the scan window is tens of MiB,
// the tables a few. The scan skips pages a dump lacks, so on the extract
// it finds the same tables at once; the corpus test checks that the
// extract decodes to the same symbols.
func (s *Selection) trimScan(l *kallsyms.Layout, kopt kallsyms.Options) {
	ci := len(s.Consumers) - 1
	c := &s.Consumers[ci]
	t, err := s.Session.Dump().Translator()
	if err != nil {
		return
	}
	info := s.Session.Dump().Info()
	start, end := kopt.ImageStart, kopt.ImageEnd
	if start == 0 && info != nil {
		var ok bool
		if start, ok = info.Symbol("_stext"); !ok {
			start, _ = info.Symbol("_text")
		}
	}
	if start == 0 {
		return
	}
	if end == 0 {
		end = start + kallsyms.DefaultScanWindow
	}
	ps := uint64(1) << s.PageShift
	pagesOf := func(va, n uint64, set map[uint64]bool) {
		for p := va &^ (ps - 1); p < va+n && p >= va&^(ps-1); p += ps {
			if pa, err := t.Translate(p); err == nil {
				set[pa>>s.PageShift] = true
			}
		}
	}
	window := map[uint64]bool{}
	pagesOf(start, end-start, window)
	tables := map[uint64]bool{}
	for _, r := range l.Regions() {
		if r.Addr != 0 {
			pagesOf(r.Addr, max(r.Size, 8), tables)
		}
	}
	var keep []uint64
	for _, p := range c.Pages {
		if window[p] && !tables[p] {
			delete(s.seen, p)
			continue
		}
		keep = append(keep, p)
	}
	c.Pages = keep
	// Translations above may have walked page tables; they belong here.
	c.Pages = append(c.Pages, s.snapshot()...)
	slices.Sort(c.Pages)
}

// splitBTF moves the pages of [__start_BTF, __stop_BTF) out of the
// "modules" consumer into a "btf" one.
func (s *Selection) splitBTF() {
	mi := len(s.Consumers) - 1
	mod := &s.Consumers[mi]
	c := s.Session.Chain()
	start, err1 := c.LookupName("__start_BTF")
	stop, err2 := c.LookupName("__stop_BTF")
	t, err3 := s.Session.Dump().Translator()
	if err1 != nil || err2 != nil || err3 != nil || stop.Addr <= start.Addr {
		return
	}
	btf := map[uint64]bool{}
	ps := uint64(1) << s.PageShift
	for va := start.Addr &^ (ps - 1); va < stop.Addr; va += ps {
		if pa, err := t.Translate(va); err == nil {
			btf[pa>>s.PageShift] = true
		}
	}
	var rest, in []uint64
	for _, p := range mod.Pages {
		if btf[p] {
			in = append(in, p)
		} else {
			rest = append(rest, p)
		}
	}
	mod.Pages = rest
	b := Consumer{Name: "btf", Pages: in}
	// The module walk failed for want of struct layouts: that is the BTF's
	// failure.
	var ne *kdumpsyms.NeedsError
	if errors.As(mod.Err, &ne) && ne.Needs == kdumpsyms.NeedLayouts {
		b.Err = ne.Err
	}
	s.Consumers = slices.Insert(s.Consumers, mi, b)
}

// MaxKeepPages caps the pages Keep adds: 16 Mi pages, 64 GiB of 4 KiB
// pages, far beyond a "small" dump, and a guard against a typo that names
// the whole address space.
const MaxKeepPages = 1 << 24

// Keep adds ranges to the selection as a "keep" consumer. Virtual ranges
// are translated page by page; the page tables read to translate them are
// kept too, so that a reader of the extract can translate them again.
// Pages of a virtual range that do not translate are an error.
func (s *Selection) Keep(ranges []Range) error {
	if len(ranges) == 0 {
		return nil
	}
	ps := uint64(1) << s.PageShift
	total := uint64(0)
	for _, r := range ranges {
		total += (r.End-r.Start)>>s.PageShift + 1
		if total > MaxKeepPages || r.End-r.Start > MaxKeepPages<<s.PageShift {
			return fmt.Errorf("extract: --keep: more than %d pages", MaxKeepPages)
		}
	}
	for _, r := range ranges {
		if !r.Virtual {
			s.addPhys(r.Start, r.End)
			continue
		}
		t, err := s.Session.Dump().Translator()
		if err != nil {
			return fmt.Errorf("extract: --keep %v: %w", r, err)
		}
		for va := r.Start &^ (ps - 1); va < r.End; va += ps {
			pa, err := t.Translate(va)
			if err != nil {
				return fmt.Errorf("extract: --keep %v: %w", r, err)
			}
			lo, hi := max(va, r.Start), min(va+ps, r.End)
			s.addPhys(pa+(lo-va), pa+(hi-va))
			if va+ps < va {
				break
			}
		}
	}
	s.Consumers = append(s.Consumers, Consumer{Name: "keep", Pages: s.snapshot()})
	return nil
}
