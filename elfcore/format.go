package elfcore

import "debug/elf"

// On-disk layout of the parts of ELF this package reads. Offsets are from
// the ELF specification; debug/elf has the same values as struct layouts.
const (
	ehdr32Size = 52
	ehdr64Size = 64
	phdr32Size = 32
	phdr64Size = 56
	shdr32Size = 40
	shdr64Size = 64

	// pnXNUM in e_phnum means the count is in section header 0's sh_info.
	pnXNUM = 0xffff

	// shInfo32 and shInfo64 are the offsets of sh_info in a section header.
	shInfo32 = 28
	shInfo64 = 44

	// noteHeaderSize is namesz, descsz and type: three 32-bit words in
	// either class.
	noteHeaderSize = 12
)

// Caps on what a file may declare, against hostile input.
const (
	// MaxNotesSize caps the total size of all PT_NOTE segments. Real dumps
	// carry a few KiB per CPU (QEMU: ~1.5 KiB of CORE and QEMU notes per
	// CPU, s390x more); 64 MiB covers tens of thousands of CPUs.
	MaxNotesSize = 64 << 20

	// MaxNotes caps the number of notes kept.
	MaxNotes = 1 << 20
)

// Note types this package interprets (include/uapi/linux/elf.h).
const (
	ntPRStatus   = 1 // "CORE": struct elf_prstatus, per CPU
	ntTaskStruct = 4 // "CORE": /proc/kcore's current task_struct
	ntVMCOREINFO = 0 // "VMCOREINFO": the kernel's VMCOREINFO text
)

// DumpELFIncomplete is makedumpfile's e_flags bit for an ELF dump cut short
// by ENOSPC: trailing segments are missing ([mdf] IMPLEMENTATION).
const DumpELFIncomplete = 0x1

// prstatusLayout says where struct elf_prstatus keeps pr_pid and pr_reg and
// which words of pr_reg are the program counter and the stack pointer, for
// one architecture. The layout depends on the kernel's ABI, given by
// e_machine, not on the ELF class of the container (QEMU writes i386 guests
// in ELF64 files).
type prstatusLayout struct {
	word   int // size of a pr_reg word and of unsigned long
	pid    int // offset of pr_pid
	reg    int // offset of pr_reg
	nreg   int // words in pr_reg
	pc, sp int // index in pr_reg
}

// prstatusLayouts for the kernels we read. 64-bit kernels share the
// generic prefix (pr_info 12 bytes, pr_cursig + pad 4, pr_sigpend,
// pr_sighold 8 each, four pid_t, four struct timeval of 16 bytes): pr_pid
// at 32, pr_reg at 112. i386 has 4-byte longs and 8-byte timevals: pr_pid
// at 24, pr_reg at 72.
var prstatusLayouts = map[elf.Machine]prstatusLayout{
	// struct user_regs_struct: r15 … orig_rax, rip (16), cs, eflags, rsp (19), ss, …: 27 words.
	elf.EM_X86_64: {word: 8, pid: 32, reg: 112, nreg: 27, pc: 16, sp: 19},
	// struct user_pt_regs: x0…x30, sp (31), pc (32), pstate: 34 words.
	elf.EM_AARCH64: {word: 8, pid: 32, reg: 112, nreg: 34, pc: 32, sp: 31},
	// struct user_regs_struct (i386): ebx … orig_eax, eip (12), xcs, eflags, esp (15), xss: 17 words.
	elf.EM_386: {word: 4, pid: 24, reg: 72, nreg: 17, pc: 12, sp: 15},
	// 32-bit ARM, the same prefix as i386: struct pt_regs' uregs r0 … r12,
	// sp (13), lr, pc (15), cpsr, orig_r0: 18 words.
	elf.EM_ARM: {word: 4, pid: 24, reg: 72, nreg: 18, pc: 15, sp: 13},
	// s390_regs: psw.mask, psw.addr (1), gprs[16] (r15 = 17), then acrs and
	// orig_gpr2 that we do not decode: 18 words read.
	elf.EM_S390: {word: 8, pid: 32, reg: 112, nreg: 18, pc: 1, sp: 17},
	// struct pt_regs (ppc64, arch/powerpc/include/uapi/asm/ptrace.h):
	// gpr[32] (r1 = 1), nip (32), msr, orig_gpr3, ctr, link (36): 37 words
	// read of the 48 of elf_gregset_t.
	elf.EM_PPC64: {word: 8, pid: 32, reg: 112, nreg: 37, pc: 32, sp: 1},
	// struct user_regs_struct (riscv64): pc (0), ra, sp (2), …: 32 words.
	elf.EM_RISCV: {word: 8, pid: 32, reg: 112, nreg: 32, pc: 0, sp: 2},
}
