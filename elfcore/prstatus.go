package elfcore

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// PRStatus is the part of a CORE NT_PRSTATUS note (struct elf_prstatus) a
// crash dump reader needs: which task a CPU ran and its registers when the
// dump was taken.
type PRStatus struct {
	PID int32 // pr_pid: the task running on the CPU (0 for an idle CPU)
	PC  uint64
	SP  uint64
	// Regs holds the words of pr_reg in the architecture's order (struct
	// user_regs_struct on x86 and riscv, user_pt_regs on arm64, s390_regs
	// up to r15 on s390x, pt_regs up to nip on ppc64).
	Regs []uint64
}

// ParsePRStatus decodes an NT_PRSTATUS descriptor written by a kernel for
// machine m in byte order bo. Known machines: EM_X86_64, EM_AARCH64,
// EM_386, EM_ARM, EM_S390 (64-bit), EM_PPC64, EM_RISCV (64-bit). For others it
// returns an error wrapping errors.ErrUnsupported; a descriptor too short
// for the layout is a *FormatError.
func ParsePRStatus(desc []byte, m elf.Machine, bo binary.ByteOrder) (PRStatus, error) {
	l, ok := prstatusLayouts[m]
	if !ok {
		return PRStatus{}, fmt.Errorf("elfcore: NT_PRSTATUS for %v: %w", m, errors.ErrUnsupported)
	}
	end := l.reg + l.nreg*l.word
	if len(desc) < end {
		return PRStatus{}, formatErr(0, fmt.Sprintf("NT_PRSTATUS for %v shorter than %d bytes", m, end), len(desc))
	}
	ps := PRStatus{PID: int32(bo.Uint32(desc[l.pid:])), Regs: make([]uint64, l.nreg)}
	for i := range ps.Regs {
		o := l.reg + i*l.word
		if l.word == 8 {
			ps.Regs[i] = bo.Uint64(desc[o:])
		} else {
			ps.Regs[i] = uint64(bo.Uint32(desc[o:]))
		}
	}
	ps.PC, ps.SP = ps.Regs[l.pc], ps.Regs[l.sp]
	return ps, nil
}
