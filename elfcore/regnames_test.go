package elfcore

import (
	"debug/elf"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRegisterNames: one name per word ParsePRStatus decodes, and the
// program counter and stack pointer where the layouts say.
func TestRegisterNames(t *testing.T) {
	pcsp := map[elf.Machine][2]string{
		elf.EM_X86_64: {"rip", "rsp"}, elf.EM_386: {"eip", "esp"}, elf.EM_AARCH64: {"pc", "sp"}, elf.EM_ARM: {"pc", "sp"},
		elf.EM_S390: {"psw_addr", "r15"}, elf.EM_PPC64: {"nip", "r1"}, elf.EM_RISCV: {"pc", "sp"},
	}
	for m, l := range prstatusLayouts {
		names := RegisterNames(m)
		if assert.Len(t, names, l.nreg, m) {
			assert.Equal(t, pcsp[m][0], names[l.pc], m)
			assert.Equal(t, pcsp[m][1], names[l.sp], m)
		}
	}
	assert.Nil(t, RegisterNames(elf.EM_MIPS))
}
