package btflayout_test

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// scanSetup opens the full QEMU zlib kdump of deb12-6.1-arm64 (256 MiB of
// RAM; BTF but no KALLSYMS_ALL, so neither modules nor __start_BTF in
// kallsyms) and decodes kallsyms.
type scanSetup struct {
	d    *vmcore.Dump
	k    memory.Reader
	res  *kallsyms.Result
	syms modsyms.Symbols
}

func openScanGuest(b *testing.B) *scanSetup {
	g := testutil.CorpusGuestNamed(b, "deb12-6.1-arm64")
	paths := g.RequireFullDump(b, testutil.DumpQEMUKdumpZlib)
	d, err := vmcore.Open(paths...)
	if err != nil {
		b.Fatal(err)
	}
	k, err := d.Kernel()
	if err != nil {
		b.Fatal(err)
	}
	res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return &scanSetup{d: d, k: k, res: res, syms: modsyms.FromFinder(res.Finder())}
}

func (s *scanSetup) scanConfig(b *testing.B) btflayout.ModuleScanConfig {
	in := s.d.Info()
	arch := s.d.Arch()
	cfg := btflayout.ModuleScanConfig{InferConfig: btflayout.InferConfig{Target: arch.Target, Release: in.OSRelease()}}
	cfg.VmapAreaList, _ = in.Symbol("vmap_area_list")
	cfg.VAStart, _ = in.Offset("vmap_area", "va_start")
	cfg.VAList, _ = in.Offset("vmap_area", "list")
	stext, ok := s.syms("_stext")
	if !ok {
		b.Fatal("no _stext")
	}
	cfg.Ranges = [][2]uint64{{stext - 2<<30, stext + 2<<30}}
	return cfg
}

// BenchmarkModuleScan finds the module list by scanning vmap_area_list's
// module areas and infers the layouts (FindModuleList runs Infer), on a
// freshly opened dump each time (the open is not timed).
func BenchmarkModuleScan(b *testing.B) {
	s := openScanGuest(b)
	cfg := s.scanConfig(b)
	paths, _ := testutil.CorpusGuestNamed(b, "deb12-6.1-arm64").FullDumpPaths(testutil.DumpQEMUKdumpZlib)
	s.d.Close()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		d, err := vmcore.Open(paths...)
		if err != nil {
			b.Fatal(err)
		}
		k, _ := d.Kernel()
		b.StartTimer()
		if _, _, err := btflayout.FindModuleList(k, cfg); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		d.Close()
		b.StartTimer()
	}
}

// BenchmarkBTFScan finds the BTF by scanning the read-only data after the
// kallsyms tables and parses it; BenchmarkBTFKnown reads and parses the same
// blob from its known address, so the difference is the cost of the scan.
func BenchmarkBTFScan(b *testing.B) {
	s := openScanGuest(b)
	defer s.d.Close()
	lo, hi := rodata(b, s)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := btflayout.ScanBTF(s.k, lo, hi); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBTFKnown(b *testing.B) {
	s := openScanGuest(b)
	defer s.d.Close()
	lo, hi := rodata(b, s)
	_, res, err := btflayout.ScanBTF(s.k, lo, hi)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		// The scan checks the blob holds struct module: so does this.
		bt, err := btflayout.FromMemory(s.k, res.Addr, res.Addr+res.Size)
		if err == nil {
			_, err = bt.Struct("module", "name")
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func rodata(b *testing.B, s *scanSetup) (lo, hi uint64) {
	l := s.res.Layout
	for _, r := range []kallsyms.Region{l.NumSymsTable, l.Names, l.Markers, l.TokenTable, l.TokenIndex, l.Addresses, l.RelativeBaseAt, l.SeqsOfNames} {
		lo = max(lo, r.Addr+r.Size)
	}
	hi, ok := s.syms("_sinittext")
	if !ok || lo == 0 {
		b.Fatal("no rodata bounds")
	}
	return lo, hi
}

// BenchmarkBTFScanOverhead is the scan's own cost: reading and checking
// the read-only data from the end of the kallsyms tables up to where the
// BTF starts (1.9 MiB on deb12-6.1-arm64), which finds nothing, on a
// freshly opened dump each time (the open is not timed).
func BenchmarkBTFScanOverhead(b *testing.B) {
	s := openScanGuest(b)
	lo, hi := rodata(b, s)
	_, res, err := btflayout.ScanBTF(s.k, lo, hi)
	if err != nil {
		b.Fatal(err)
	}
	s.d.Close()
	paths, _ := testutil.CorpusGuestNamed(b, "deb12-6.1-arm64").FullDumpPaths(testutil.DumpQEMUKdumpZlib)
	b.SetBytes(int64(res.Addr - lo))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		d, err := vmcore.Open(paths...)
		if err != nil {
			b.Fatal(err)
		}
		k, _ := d.Kernel()
		b.StartTimer()
		if _, _, err := btflayout.ScanBTF(k, lo, res.Addr); err == nil {
			b.Fatal("found a BTF before the BTF")
		}
		b.StopTimer()
		d.Close()
		b.StartTimer()
	}
}

// BenchmarkModuleScanS390X finds the module list of the full QEMU zlib
// kdump of deb13-6.12-s390x (256 MiB, big-endian, v6.12: no
// vmap_area_list) through the page tables (the DAT enumeration of the
// 2 GiB around _stext) and infers the layouts, on a freshly opened dump
// each time (the open and kallsyms are not timed).
func BenchmarkModuleScanS390X(b *testing.B) {
	paths := testutil.CorpusGuestNamed(b, "deb13-6.12-s390x").RequireFullDump(b, testutil.DumpQEMUKdumpZlib)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		d, err := vmcore.Open(paths...)
		if err != nil {
			b.Fatal(err)
		}
		k, _ := d.Kernel()
		res, err := kallsyms.Load(k, d.Info(), kallsyms.Options{})
		if err != nil {
			b.Fatal(err)
		}
		syms := modsyms.FromFinder(res.Finder())
		stext, _ := syms("_stext")
		arch := d.Arch()
		cfg := btflayout.ModuleScanConfig{InferConfig: btflayout.InferConfig{Target: arch.Target, Release: d.Info().OSRelease()}}
		cfg.Ranges = [][2]uint64{{stext - 2<<30, stext + 2<<30}}
		tr, err := d.Translator()
		if err != nil {
			b.Fatal(err)
		}
		cfg.Mapped = tr.(vtop.Mapper).Mapped
		if init, ok := syms("_sinittext"); ok {
			cfg.Exclude = [][2]uint64{{stext, init}}
		}
		b.StartTimer()
		if _, _, err := btflayout.FindModuleList(k, cfg); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		d.Close()
		b.StartTimer()
	}
}
