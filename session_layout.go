package kdumpsyms

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/kallsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// LayoutMode says where a session takes struct layouts from when
// Options.Layout is nil.
type LayoutMode uint8

const (
	// LayoutsAuto takes the vmlinux BTF in the dump (located by
	// __start_BTF/__stop_BTF, else by scanning the kernel's read-only
	// data) and, without one, infers the layouts from the dump.
	LayoutsAuto LayoutMode = iota
	// LayoutsBTF takes the vmlinux BTF in the dump or fails.
	LayoutsBTF
	// LayoutsInfer infers the layouts from the dump even when it has BTF.
	LayoutsInfer
)

// ErrNoLayouts means no struct layouts could be had from the dump: supply
// a BTF file or a layout table (the CLI's --btf and --layout flags).
var ErrNoLayouts = memory.WithRemedy(errors.New("no struct layouts for the modules"), memory.SupplyLayouts)

// layState is what a session found of the struct layouts and the module
// list head, each once.
type layState struct {
	once sync.Once
	src  btflayout.Source
	how  string
	err  error

	modOnce sync.Once
	modSrc  btflayout.Source
	modHow  string
	modErr  error

	// The dump's own BTF, found and decoded once for every user: the
	// layouts (and through them modules, ftrace, BPF, kprobes and ORC)
	// and BTF.
	btfOnce sync.Once
	btf     *btflayout.BTF
	btfHow  string
	btfErr  error

	headOnce sync.Once
	head     uint64
	headHow  string
	headInf  *btflayout.Inferred // what the scan inferred, if it ran
	headErr  error
}

// Layouts returns the struct layouts the session uses for the modules and
// how they were found ("given", "vmlinux BTF ... (__start_BTF)", "...
// found by scanning ...", "inferred ..."). Errors wrap ErrNoLayouts or
// btflayout.ErrNoBTF with what was tried.
func (s *Session) Layouts() (btflayout.Source, string, error) {
	src, err := s.moduleLayout()
	return src, s.laySt.modHow, err
}

// moduleLayout is layout, except that LayoutsInfer infers: the ftrace, BPF
// and kprobes sources need structs inference does not find, so they keep
// the dump's BTF.
func (s *Session) moduleLayout() (btflayout.Source, error) {
	st := &s.laySt
	st.modOnce.Do(func() {
		if s.opt.Layout != nil || s.opt.Layouts != LayoutsInfer {
			st.modSrc, st.modErr = s.layout()
			st.modHow = st.how
			return
		}
		st.modSrc, st.modErr = s.inferLayouts()
		st.modHow = "inferred from the dump (forced)"
	})
	return st.modSrc, st.modErr
}

// ModuleListHead returns the address of the modules list head and how it
// was found: the modules symbol, or a scan of module memory.
func (s *Session) ModuleListHead() (uint64, string, error) {
	h, err := s.moduleHead()
	return h, s.laySt.headHow, err
}

func (s *Session) layout() (btflayout.Source, error) {
	st := &s.laySt
	st.once.Do(func() {
		if s.opt.Layout != nil {
			st.src, st.how = s.opt.Layout, "given: "+s.opt.Layout.Describe()
			return
		}
		if _, err := s.Kallsyms(); err != nil {
			st.err = err
			return
		}
		b, how, btfErr := s.dumpBTF()
		if btfErr == nil {
			st.src, st.how = b, how
			return
		}
		if s.opt.Layouts == LayoutsBTF || errors.Is(btfErr, memory.ErrCorrupt) {
			// A BTF that is there but does not parse is damage to
			// report, not an absence to infer around.
			st.err = fmt.Errorf("reading the dump's BTF: %w", btfErr)
			return
		}
		inf, infErr := s.inferLayouts()
		if infErr == nil {
			st.src, st.how = inf, "inferred from the dump (no BTF: "+btfErr.Error()+")"
			return
		}
		st.err = fmt.Errorf("%w: %w; inferring them: %w", ErrNoLayouts, btfErr, infErr)
	})
	return st.src, st.err
}

// BTF returns the kernel's BTF and where it came from: the --btf blob or
// vmlinux given as Options.Layout when it is BTF, else the dump's own
// (between __start_BTF and __stop_BTF, or found by scan), read once and
// shared with the struct layouts. Callers that need every type (package
// export's ISF) call its Spec. Errors wrap btflayout.ErrNoBTF when the
// dump has none, memory.ErrCorrupt when it does not parse.
func (s *Session) BTF() (*btflayout.BTF, string, error) {
	if b, ok := s.opt.Layout.(*btflayout.BTF); ok {
		return b, "given: " + b.Describe(), nil
	}
	return s.dumpBTF()
}

// dumpBTF finds and reads the vmlinux BTF of the dump, once: between
// __start_BTF and __stop_BTF, or found by scanning the read-only data
// after the kallsyms tables up to the init text.
func (s *Session) dumpBTF() (*btflayout.BTF, string, error) {
	st := &s.laySt
	st.btfOnce.Do(func() {
		k, err := s.Kallsyms()
		if err != nil {
			st.btfErr = err
			return
		}
		t := s.stats.begin("btf")
		st.btf, st.btfHow, st.btfErr = s.findBTF(k.Finder())
		s.stats.end(t)
	})
	return st.btf, st.btfHow, st.btfErr
}

func (s *Session) findBTF(f symfinder.Finder) (*btflayout.BTF, string, error) {
	kmem, _ := s.Kernel()
	syms := modsyms.FromFinder(f)
	start, ok1 := syms("__start_BTF")
	stop, ok2 := syms("__stop_BTF")
	if ok1 && ok2 {
		b, err := btflayout.FromMemory(kmem, start, stop)
		if err != nil {
			return nil, "", err
		}
		return b, b.Describe() + " (between __start_BTF and __stop_BTF)", nil
	}
	lo, hi, err := s.rodataRange(syms)
	if err != nil {
		return nil, "", fmt.Errorf("the kernel's symbols have no __start_BTF/__stop_BTF and %w", err)
	}
	b, _, err := btflayout.ScanBTF(kmem, lo, hi)
	if err != nil {
		return nil, "", fmt.Errorf("the kernel's symbols have no __start_BTF/__stop_BTF: %w", err)
	}
	return b, b.Describe(), nil
}

// rodataRange is where the BTF may be: from the end of the kallsyms
// tables (or _etext) to _sinittext.
func (s *Session) rodataRange(syms modsyms.Symbols) (lo, hi uint64, err error) {
	if etext, ok := syms("_etext"); ok {
		lo = etext
	}
	if k, err := s.Kallsyms(); err == nil {
		l := k.Layout
		for _, r := range []kallsyms.Region{l.NumSymsTable, l.Names, l.Markers, l.TokenTable, l.TokenIndex, l.Addresses, l.RelativeBaseAt, l.SeqsOfNames} {
			if r.Addr != 0 {
				lo = max(lo, r.Addr+r.Size)
			}
		}
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("neither _etext nor the kallsyms tables bound the read-only data: %w", btflayout.ErrNoBTF)
	}
	hi = lo + maxRodata
	if init, ok := syms("_sinittext"); ok && init > lo {
		hi = min(hi, init)
	}
	return lo, hi, nil
}

// maxRodata bounds the read-only data scanned for BTF when _sinittext is
// unknown.
const maxRodata = 64 << 20

// moduleWindow is how far from the kernel text modules may be: arm64 puts
// them in a 2 GiB window around the image (CONFIG_RANDOMIZE_MODULE_REGION_FULL),
// x86_64 within the 2 GiB above __START_KERNEL_map.
const moduleWindow = 2 << 30

func (s *Session) moduleHead() (uint64, error) {
	st := &s.laySt
	st.headOnce.Do(func() {
		k, err := s.Kallsyms()
		if err != nil {
			st.headErr = err
			return
		}
		syms := modsyms.FromFinder(k.Finder())
		if h, ok := syms("modules"); ok {
			st.head, st.headHow = h, "the modules symbol"
			return
		}
		kmem, _ := s.Kernel()
		in := s.dump.Info()
		if in == nil {
			st.headErr = fmt.Errorf("modules symbol unknown and no VMCOREINFO to scan by: %w", modsyms.ErrMissingInfo)
			return
		}
		cfg := btflayout.ModuleScanConfig{InferConfig: s.inferConfig()}
		cfg.VmapAreaList, _ = in.Symbol("vmap_area_list")
		cfg.VAStart, _ = in.Offset("vmap_area", "va_start")
		var ok bool
		if cfg.VAList, ok = in.Offset("vmap_area", "list"); !ok {
			cfg.VmapAreaList = 0
		}
		top := ^uint64(0)
		if cfg.Target.PtrSize == 4 {
			top = 0xffffffff
		}
		if lo, ok := in.Number("MODULES_VADDR"); ok {
			if hi, ok := in.Number("MODULES_END"); ok && hi > lo {
				cfg.Ranges = append(cfg.Ranges, [2]uint64{lo, hi})
			}
		}
		// Where the architecture's layout places module memory and
		// VMCOREINFO does not say (ppc64: the start of vmalloc; s390x:
		// below the kernel image, or the top of the address space).
		if tr, err := s.dump.Translator(); err == nil {
			cfg.Ranges = append(cfg.Ranges, tr.Layout().Modules...)
		}
		if stext, ok := syms("_stext"); ok {
			lo, hi := stext-moduleWindow, stext+moduleWindow
			if lo > stext {
				lo = 0
			}
			if hi < stext || hi > top {
				hi = top
			}
			cfg.Ranges = append(cfg.Ranges, [2]uint64{lo, hi})
		}
		how := "the module areas on vmap_area_list"
		if cfg.VmapAreaList == 0 {
			s.pageTableScan(&cfg, syms)
			how = "the mapped pages of the module ranges (page tables)"
		}
		t := s.stats.begin("module scan")
		st.head, st.headInf, err = btflayout.FindModuleList(kmem, cfg)
		s.stats.end(t)
		if err != nil {
			st.headErr = fmt.Errorf("modules symbol unknown (kallsyms without CONFIG_KALLSYMS_ALL) and %w", err)
			return
		}
		st.headHow = "found by scanning " + how
	})
	return st.head, st.headErr
}

func (s *Session) inferConfig() btflayout.InferConfig {
	cfg := btflayout.InferConfig{Target: s.target()}
	if in := s.dump.Info(); in != nil {
		cfg.Release = in.OSRelease()
	}
	return cfg
}

func (s *Session) inferLayouts() (btflayout.Source, error) {
	head, err := s.moduleHead()
	if err != nil {
		return nil, err
	}
	if s.laySt.headInf != nil {
		return s.laySt.headInf, nil
	}
	kmem, _ := s.Kernel()
	cfg := s.inferConfig()
	cfg.Head = head
	t := s.stats.begin("infer")
	defer s.stats.end(t)
	return btflayout.Infer(kmem, cfg)
}

// pageTableScan sets up the module scan through the page tables, for
// kernels without vmap_area_list in VMCOREINFO (v6.9+): the mapped runs
// of the module ranges, less the kernel's text and read-only data.
func (s *Session) pageTableScan(cfg *btflayout.ModuleScanConfig, syms modsyms.Symbols) {
	tr, err := s.dump.Translator()
	if err != nil {
		return
	}
	m, ok := tr.(vtop.Mapper)
	if !ok {
		return
	}
	kmem, _ := s.Kernel()
	lr, _ := kmem.(*lockedReader)
	cfg.Mapped = func(lo, hi uint64, yield func(start, end uint64) bool) error {
		if lr != nil {
			lr.mu.Lock()
			defer lr.mu.Unlock()
		}
		return m.Mapped(lo, hi, yield)
	}
	cfg.DirectMap = tr.Layout().DirectMap
	in := s.dump.Info()
	if s.dump.Arch().Name == "x86_64" {
		// The module region follows the kernel text map:
		// [__START_KERNEL_map + KERNEL_IMAGE_SIZE, MODULES_END).
		size, ok := in.Number("KERNEL_IMAGE_SIZE")
		if !ok {
			size = 1 << 30
		}
		cfg.Ranges = [][2]uint64{{0xffffffff80000000 + size, 0xffffffffff000000}}
	}
	if po := cfg.DirectMap; s.dump.Arch().Name == "arm" && po >= armModuleArea {
		// 32-bit ARM (docs/formats.md §4.6): the module area below the
		// pkmap area, [PAGE_OFFSET − 16 MiB, PAGE_OFFSET − 2 MiB), which
		// may run on mapped into the linear map and hide it from the
		// DirectMap skip; then vmalloc space, which ARM_MODULE_PLTS lets
		// modules spill into.
		cfg.Ranges = [][2]uint64{{po - armModuleArea, po - armPkmapSize}}
		if vs, ok := in.Number("VMALLOC_START"); ok && vs > po && vs < armVmallocEnd {
			cfg.Ranges = append(cfg.Ranges, [2]uint64{vs, armVmallocEnd})
		}
	}
	if stext, ok := syms("_stext"); ok {
		if init, ok := syms("_sinittext"); ok && init > stext {
			cfg.Exclude = append(cfg.Exclude, [2]uint64{stext, init})
		}
	}
}

// 32-bit ARM's module area size below PAGE_OFFSET (8 MiB with
// THUMB2_KERNEL, inside it), the pkmap area at its top (HIGHMEM), and
// VMALLOC_END (arch/arm/include/asm/memory.h, pgtable.h).
const (
	armModuleArea = 16 << 20
	armPkmapSize  = 2 << 20
	armVmallocEnd = 0xff800000
)

// typeInSize reports a v5.0 or v5.1 kernel, which kept a module symbol's
// type letter in st_size (see modsyms.Options.TypeInSize).
func (s *Session) typeInSize() bool {
	in := s.dump.Info()
	if in == nil {
		return false
	}
	rel := in.OSRelease()
	return strings.HasPrefix(rel, "5.0.") || strings.HasPrefix(rel, "5.1.") || rel == "5.0" || rel == "5.1"
}
