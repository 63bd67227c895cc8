package kdumpsyms

import (
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/unwind"
)

// Stack is one CPU's stack as Unwind found it.
type Stack struct {
	// Unwinder names how Frames were found: "frame pointers" (arm64,
	// i386), "back chain" (s390x) or "ORC" (x86_64); "" when the stack was
	// not unwound, Stop.Err saying why.
	Unwinder string
	Frames   []unwind.Frame
	Stop     unwind.Stop
}

// fpRegister is the frame pointer's (s390x: the stack pointer's) index in
// PRSTATUS's registers, and pcName the program counter's name.
var (
	fpRegister = map[string]int{"arm64": 29, "i386": 5, "s390x": 17}
	pcName     = map[string]string{"arm64": "pc", "i386": "eip", "s390x": "psw_addr"}
)

// Unwind walks the kernel stack of a CPU whose registers, in PRSTATUS's
// order, are regs (vmcore.CPU.Regs), with what the kernel keeps without
// debug info: frame records on arm64 and i386, the back chain on s390x,
// vmlinux's ORC tables on x86_64 (found through the kernel's symbols). The
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
	kernelStart := uint64(1) << 63
	switch {
	case arch.Name == "s390x":
		kernelStart = 0 // the kernel runs at low addresses, in its own address space
	case arch.PtrSize == 4:
		kernelStart = 0x80000000
	}
	if arch.Name == "x86_64" {
		return s.unwindORC(regs, kernelStart)
	}
	fpi, ok := fpRegister[arch.Name]
	if !ok || fpi >= len(regs) {
		return Stack{Stop: unwind.Stop{Err: fmt.Errorf("kdumpsyms: no unwinder for %q kernels: %w", arch.Name, errors.ErrUnsupported)}}
	}
	opt := unwind.Options{ByteOrder: arch.ByteOrder, PtrSize: arch.PtrSize, KernelStart: kernelStart, UserEnd: kernelStart}
	if in := d.Info(); in != nil {
		if m, ok := in.Get("NUMBER(KERNELPACMASK)"); ok {
			fmt.Sscanf(m, "0x%x", &opt.PACMask)
		}
	}
	switch arch.Name {
	case "arm64":
		opt.StackSize = max(16<<10, uint64(d.PageSize())) // THREAD_SIZE
	case "i386":
		opt.StackSize = 8 << 10
		// User space ends at PAGE_OFFSET, the 1 GiB boundary below the
		// kernel's text (0xc0000000 with the default 3G/1G split).
		if st, err := s.chain.LookupName("_stext"); err == nil {
			opt.UserEnd = st.Addr &^ (1<<30 - 1)
		}
	case "s390x":
		opt.UserEnd = 0
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
	frames, stop := unwind.FramePointer(kmem, pc, regs[fpi], opt)
	return Stack{Unwinder: "frame pointers", Frames: frames, Stop: stop}
}

// unwindORC walks an x86_64 stack with vmlinux's ORC tables, found by their
// symbols (kallsyms has them with CONFIG_KALLSYMS_ALL, Debian's default),
// in the entry layout OSRELEASE names.
func (s *Session) unwindORC(regs []uint64, kernelStart uint64) Stack {
	var t unwind.ORCTables
	for _, v := range []struct {
		name string
		addr *uint64
	}{{"__start_orc_unwind_ip", &t.IPStart}, {"__stop_orc_unwind_ip", &t.IPStop}, {"__start_orc_unwind", &t.Entries}} {
		sym, err := s.chain.LookupName(v.name)
		if err != nil {
			return Stack{Stop: unwind.Stop{Err: fmt.Errorf("kdumpsyms: the ORC tables are not found: %w", err)}}
		}
		*v.addr = sym.Addr
	}
	if in := s.dump.Info(); in != nil {
		var maj, min int
		fmt.Sscanf(in.OSRelease(), "%d.%d", &maj, &min)
		t.Format = unwind.ORCFormatFor(maj, min)
	}
	kmem, _ := s.Kernel()
	frames, stop := unwind.ORC(kmem, regs, t, unwind.Options{KernelStart: kernelStart})
	return Stack{Unwinder: "ORC", Frames: frames, Stop: stop}
}
