package kdumpsyms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/unwind"
)

// Stack is one CPU's stack as Unwind found it.
type Stack struct {
	// Unwinder names how Frames were found: "frame pointers" (arm64,
	// i386, riscv64), "back chain" (s390x, ppc64), "ORC" (x86_64) or
	// "ARM unwind tables" (32-bit ARM); "" when the stack was
	// not unwound, Stop.Err saying why. A frame the unwinder's own rules
	// did not give (ORC's after a kdump capture's first frame) says how it
	// was found in its Recovered.
	Unwinder string
	Frames   []unwind.Frame
	Stop     unwind.Stop
}

// fpRegister is the frame pointer's (s390x: the stack pointer's) index in
// PRSTATUS's registers, and pcName the program counter's name.
var (
	fpRegister = map[string]int{"arm64": 29, "i386": 5, "s390x": 17, "ppc64le": 1, "ppc64": 1, "riscv64": 8}
	pcName     = map[string]string{"arm64": "pc", "i386": "eip", "s390x": "psw_addr", "ppc64le": "nip", "ppc64": "nip", "riscv64": "pc"}
)

// Unwind walks the kernel stack of a CPU whose registers, in PRSTATUS's
// order, are regs (vmcore.CPU.Regs), with what the kernel keeps without
// debug info: frame records on arm64, i386 and riscv64, the back chain on s390x,
// vmlinux's and the modules' ORC tables on x86_64 (see ORCTables), the
// EHABI unwind tables on 32-bit ARM (see ARMTables). The
// frames found are returned with why the walk stopped; an architecture with
// no unwinder gives no frames and an error wrapping errors.ErrUnsupported.
func (s *Session) Unwind(regs []uint64) Stack {
	d := s.dump
	arch := d.Arch()
	kmem, err := s.Kernel()
	if err != nil {
		return Stack{Stop: unwind.Stop{Err: fmt.Errorf("kdumpsyms: unwind: %w", err)}}
	}
	// The lowest address of kernel text, and where user space ends.
	kernelStart := arch.KernelStart()
	if arch.Name == "x86_64" {
		return s.unwindORC(regs, kernelStart)
	}
	if arch.Name == "arm" {
		return s.unwindARM(regs, kernelStart)
	}
	fpi, ok := fpRegister[arch.Name]
	if !ok || fpi >= len(regs) {
		return Stack{Stop: unwind.Stop{Err: fmt.Errorf("kdumpsyms: no unwinder for %q kernels: %w", arch.Name, errors.ErrUnsupported)}}
	}
	tgt := s.target()
	opt := unwind.Options{Target: tgt, KernelStart: kernelStart, UserEnd: kernelStart}
	if in := d.Info(); in != nil {
		if m, ok := in.Get("NUMBER(KERNELPACMASK)"); ok {
			fmt.Sscanf(m, "0x%x", &opt.PACMask)
		}
	}
	switch arch.Name {
	case "arm64":
		opt.StackSize = max(16<<10, uint64(tgt.PageSize)) // THREAD_SIZE
	case "i386":
		opt.StackSize = 8 << 10
		// User space ends at PAGE_OFFSET, the 1 GiB boundary below the
		// kernel's text (0xc0000000 with the default 3G/1G split).
		if st, err := s.chain.LookupName("_stext"); err == nil {
			opt.UserEnd = st.Addr &^ (1<<30 - 1)
		}
	case "s390x":
		opt.UserEnd = 0
	case "riscv64":
		// THREAD_SIZE 16 KiB; s0 points above its {fp, ra} record; ra
		// (x1, PRSTATUS word 1) for a leaf that saved none.
		opt.StackSize = 16 << 10
		opt.RecordBelow = true
		if len(regs) > 1 {
			opt.RA = regs[1]
		}
		opt.ExceptionEntry = s.riscvExceptionEntry()
		opt.Text = s.riscvText()
	}
	var pc uint64
	for i, n := range elfcore.RegisterNames(arch.ELFMachine()) {
		if n == pcName[arch.Name] && i < len(regs) {
			pc = regs[i]
		}
	}
	if arch.Name == "s390x" {
		frames, stop := unwind.BackChainS390(kmem, pc, regs[fpi], opt)
		return Stack{Unwinder: "back chain", Frames: frames, Stop: stop}
	}
	if arch.Name == "ppc64le" || arch.Name == "ppc64" {
		// Kernel stacks are in the linear map (or vmalloc), from
		// PAGE_OFFSET; THREAD_SIZE is 16 KiB or more (32 KiB on Debian).
		opt.KernelStart, opt.UserEnd = 0xc000000000000000, 0
		frames, stop := unwind.BackChainPPC64(kmem, pc, regs[fpi], opt)
		return Stack{Unwinder: "back chain", Frames: frames, Stop: stop}
	}
	frames, stop := unwind.FramePointer(kmem, pc, regs[fpi], opt)
	return Stack{Unwinder: "frame pointers", Frames: frames, Stop: stop}
}

// unwindARM walks a 32-bit ARM stack with the kernel's EHABI unwind
// tables (CONFIG_ARM_UNWIND), vmlinux's and the modules'. THREAD_SIZE is
// 8 KiB (arch/arm/include/asm/thread_info.h, THREAD_SIZE_ORDER 1, without
// KASAN); a walk may change stacks (the IRQ stack's call_with_stack) at
// most MaxStacks times.
func (s *Session) unwindARM(regs []uint64, kernelStart uint64) Stack {
	t, _, err := s.ARMTables()
	if err != nil {
		return Stack{Stop: unwind.Stop{Err: err}}
	}
	kmem, _ := s.Kernel()
	frames, stop := unwind.ARM(kmem, regs, t, unwind.Options{Target: s.target(), KernelStart: kernelStart, StackSize: 8 << 10})
	return Stack{Unwinder: "ARM unwind tables", Frames: frames, Stop: stop}
}

// maxEntryCode bounds riscv64's trap entry code, handle_exception to
// ret_from_exception_end: 0x1ba bytes on 6.12.
const maxEntryCode = 64 << 10

// riscvExceptionEntry returns riscv64's trap entry code, [handle_exception,
// ret_from_exception_end) (arch/riscv/kernel/entry.S, v6.12 and v7.2; the
// range walk_stackframe tests), from the kernel's symbols; the zero range,
// so that no exception frame is crossed, when either is missing or they
// do not make a range of entry code.
func (s *Session) riscvExceptionEntry() unwind.Range {
	start, err := s.chain.LookupName("handle_exception")
	if err != nil {
		return unwind.Range{}
	}
	end, err := s.chain.LookupName("ret_from_exception_end")
	if err != nil || end.Addr <= start.Addr || end.Addr-start.Addr > maxEntryCode {
		return unwind.Range{}
	}
	return unwind.Range{Start: start.Addr, End: end.Addr}
}

// riscvText returns where riscv64 kernel code can be: vmlinux's text and
// init text (_stext.._etext, _sinittext.._einittext) and the module area
// (VMCOREINFO's MODULES_VADDR..MODULES_END, which holds the BPF JIT's
// region too); nil, so that no pc is refused, without _stext and _etext.
func (s *Session) riscvText() []unwind.Range {
	var out []unwind.Range
	for _, p := range [][2]string{{"_stext", "_etext"}, {"_sinittext", "_einittext"}} {
		lo, err1 := s.chain.LookupName(p[0])
		hi, err2 := s.chain.LookupName(p[1])
		if err1 != nil || err2 != nil || hi.Addr <= lo.Addr {
			if p[0] == "_stext" {
				return nil
			}
			continue
		}
		out = append(out, unwind.Range{Start: lo.Addr, End: hi.Addr})
	}
	if in := s.dump.Info(); in != nil {
		if lo, ok := in.Number("MODULES_VADDR"); ok {
			if hi, ok := in.Number("MODULES_END"); ok && hi > lo {
				out = append(out, unwind.Range{Start: lo, End: hi})
			}
		}
	}
	return out
}

// unwindORC walks an x86_64 stack with vmlinux's ORC tables, found by their
// symbols (kallsyms has them with CONFIG_KALLSYMS_ALL, Debian's default),
// and the modules' (through struct module's arch, offsets from BTF), in
// the entry layout .orc_header names, else the one OSRELEASE names.
func (s *Session) unwindORC(regs []uint64, kernelStart uint64) Stack {
	t, err := s.ORCTables()
	if err != nil {
		return Stack{Stop: unwind.Stop{Err: err}}
	}
	kmem, _ := s.Kernel()
	frames, stop := unwind.ORC(kmem, regs, t, unwind.Options{KernelStart: kernelStart})
	return Stack{Unwinder: "ORC", Frames: frames, Stop: stop}
}

// ORCTables returns where an x86_64 kernel's ORC tables are: vmlinux's,
// by their symbols, the .orc_header hash where the kernel has one, the
// format OSRELEASE implies, and the modules' tables (ModulesErr says why
// they are absent: a *NeedsError of SourceModuleORC when they need BTF). An .orc_header of the wrong size is an
// error wrapping unwind.ErrORCFormat. They are found once, for every CPU's
// walk.
func (s *Session) ORCTables() (unwind.ORCTables, error) {
	st := &s.orcSt
	st.tabOnce.Do(func() { st.tab, st.tabErr = s.findORCTables() })
	return st.tab, st.tabErr
}

func (s *Session) findORCTables() (unwind.ORCTables, error) {
	var t unwind.ORCTables
	for _, v := range []struct {
		name string
		addr *uint64
	}{{"__start_orc_unwind_ip", &t.IPStart}, {"__stop_orc_unwind_ip", &t.IPStop}, {"__start_orc_unwind", &t.Entries}} {
		sym, err := s.chain.LookupName(v.name)
		if err != nil {
			return t, fmt.Errorf("kdumpsyms: the ORC tables are not found: %w", err)
		}
		*v.addr = sym.Addr
	}
	if in := s.dump.Info(); in != nil {
		var maj, min int
		fmt.Sscanf(in.OSRelease(), "%d.%d", &maj, &min)
		t.Format = unwind.ORCFormatFor(maj, min)
	}
	kmem, err := s.Kernel()
	if err != nil {
		return t, fmt.Errorf("kdumpsyms: unwind: %w", err)
	}
	if hs, err := s.chain.LookupName("__start_orc_header"); err == nil {
		he, err := s.chain.LookupName("__stop_orc_header")
		if err != nil || he.Addr-hs.Addr != unwind.ORCHeaderSize {
			return t, fmt.Errorf("kdumpsyms: .orc_header [%#x, %#x) is not the %d-byte hash of the ORC format: %w", hs.Addr, he.Addr, unwind.ORCHeaderSize, unwind.ErrORCFormat)
		}
		t.Header = make([]byte, unwind.ORCHeaderSize)
		if err := memory.ReadFull(kmem, t.Header, hs.Addr); err != nil {
			return t, fmt.Errorf("kdumpsyms: reading .orc_header: %w", err)
		}
	}
	t.LoadModules = s.orcModules
	t.MayBeModule = func(a uint64) bool { return !s.outsideModuleArea(a) }
	// The function holding an address, for a first frame ORC cannot
	// unwind (a kdump capture's crash_setup_regs registers).
	t.Func = func(a uint64) (uint64, uint64, bool) {
		sym, err := s.chain.Lookup(a)
		if err != nil || sym.Size == 0 || a-sym.Addr >= sym.Size {
			return 0, 0, false
		}
		return sym.Addr, sym.Addr + sym.Size, true
	}
	return t, nil
}

// orcState holds where the ORC tables are and the modules' tables, each
// found once.
type orcState struct {
	tabOnce sync.Once
	tab     unwind.ORCTables
	tabErr  error

	once sync.Once
	mods []unwind.ORCModule
	err  error
}

// orcModules reads each module's ORC tables: struct module's arch member,
// a struct mod_arch_specific { unsigned int num_orcs; int *orc_unwind_ip;
// struct orc_entry *orc_unwind; } (CONFIG_UNWINDER_ORC), one ORCModule per
// text region. Its offsets come from the dump's BTF; inferred layouts do
// not find them, so without BTF the error says module frames need it.
func (s *Session) orcModules() ([]unwind.ORCModule, error) {
	st := &s.orcSt
	st.once.Do(func() {
		needBTF := func(err error) error { return &NeedsError{Source: SourceModuleORC, Needs: NeedBTF, Err: err} }
		src, err := s.layout()
		if err != nil {
			st.err = needBTF(err)
			return
		}
		mod, err := src.Struct("module", "arch")
		if err != nil {
			st.err = needBTF(err)
			return
		}
		ma, err := src.Struct("mod_arch_specific", "num_orcs", "orc_unwind_ip", "orc_unwind")
		if err != nil {
			st.err = needBTF(err)
			return
		}
		arch, _ := mod.Field("arch")
		num, _ := ma.Field("num_orcs")
		ip, _ := ma.Field("orc_unwind_ip")
		ent, _ := ma.Field("orc_unwind")
		size := ma.End()
		if size > 64 || num.Offset+4 > size || ip.Offset+8 > size || ent.Offset+8 > size {
			st.err = fmt.Errorf("struct mod_arch_specific of %d bytes: %w", size, memory.ErrCorrupt)
			return
		}
		set, err := s.Modules()
		if set == nil {
			st.err = fmt.Errorf("the module list: %w", err)
			return
		}
		kmem, _ := s.Kernel()
		le := binary.LittleEndian
		var b [64]byte
		var bad []error
		for _, m := range set.Modules() {
			if err := memory.ReadFull(kmem, b[:size], m.Addr+arch.Offset); err != nil {
				bad = append(bad, fmt.Errorf("module %s: arch: %w", m.Name, err))
				continue
			}
			var text uint64
			for _, r := range m.Regions {
				text += r.TextSize
			}
			om := unwind.ORCModule{
				Name:     m.Name,
				N:        uint64(le.Uint32(b[num.Offset:])),
				IP:       le.Uint64(b[ip.Offset:]),
				Entries:  le.Uint64(b[ent.Offset:]),
				TextSize: text,
			}
			for _, r := range m.Regions {
				if r.TextSize > 0 && r.Base+r.TextSize > r.Base {
					om.Start, om.End = r.Base, r.Base+r.TextSize
					st.mods = append(st.mods, om)
				}
			}
		}
		if len(st.mods) == 0 {
			st.err = errors.Join(bad...)
		}
	})
	return st.mods, st.err
}
