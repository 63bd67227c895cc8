package kallsyms

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigPtrSize: a VMCOREINFO naming 32-bit ARM (CONFIG_ARM_LPAE)
// means 4-byte pointers; the other architectures it names are 64-bit.
func TestConfigPtrSize(t *testing.T) {
	for text, want := range map[string]int{
		"OSRELEASE=6.12.0\nSYMBOL(_stext)=c0400000\nCONFIG_ARM_LPAE=y\n":                         4,
		"OSRELEASE=6.12.0\nSYMBOL(_stext)=ffff800080010000\nNUMBER(VA_BITS)=48\n":                8,
		"OSRELEASE=6.12.0\nSYMBOL(_stext)=c1000000\n":                                            4,
		"OSRELEASE=6.12.0\nSYMBOL(_stext)=ffffffff81000000\nSYMBOL(init_top_pgt)=ffffffff82a0\n": 8,
	} {
		in, err := vmcoreinfo.Parse([]byte(text))
		require.NoError(t, err)
		assert.Equal(t, want, newConfig(in, Options{}).ptr, text)
	}
}
