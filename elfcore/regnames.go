package elfcore

import (
	"debug/elf"
	"fmt"
)

// RegisterNames returns the names of the words of PRStatus.Regs for
// machine m, in order, as the kernel's register dumps name them; nil for a
// machine ParsePRStatus does not know.
func RegisterNames(m elf.Machine) []string {
	switch m {
	case elf.EM_X86_64:
		return []string{"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8",
			"rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss",
			"fs_base", "gs_base", "ds", "es", "fs", "gs"}
	case elf.EM_386:
		return []string{"ebx", "ecx", "edx", "esi", "edi", "ebp", "eax", "ds", "es", "fs", "gs",
			"orig_eax", "eip", "cs", "eflags", "esp", "ss"}
	case elf.EM_ARM:
		return append(numbered("r", 11), "fp", "ip", "sp", "lr", "pc", "cpsr", "orig_r0")
	case elf.EM_AARCH64:
		return append(numbered("x", 31), "sp", "pc", "pstate")
	case elf.EM_S390:
		return append([]string{"psw_mask", "psw_addr"}, numbered("r", 16)...)
	case elf.EM_PPC64:
		return append(numbered("r", 32), "nip", "msr", "orig_r3", "ctr", "link")
	case elf.EM_RISCV:
		return []string{"pc", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1",
			"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7",
			"s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6"}
	}
	return nil
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
