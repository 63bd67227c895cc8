package bpfsyms

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/btflayout"
)

// kernelKsym appends a struct bpf_ksym as the kernel lays it out (start,
// end, name[nameLen], lnode) to bpf_kallsyms.
func (b *kbuilder) kernelKsym(nameLen, start, end uint64, name string) uint64 {
	h, ok := b.syms["bpf_kallsyms"]
	if !ok {
		h = b.head("bpf_kallsyms")
	}
	// Other data first, so that a wrong name length reads something.
	b.str("not a bpf symbol: some other allocation of the kernel heap....")
	k := b.alloc(16 + nameLen + 16 + 40)
	b.mem.PutU64(k, start)
	b.mem.PutU64(k+8, end)
	b.mem.Write(k+16, []byte(name))
	b.link(h, k+16+nameLen)
	return k
}

// TestBPFInferredLayout: without BTF (no struct bpf_ksym in the layout
// source), the layout is the kernel's fixed one with the KSYM_NAME_LEN
// the entries validate: 128 before v6.1, 512 after.
func TestBPFInferredLayout(t *testing.T) {
	for _, nameLen := range []uint64{128, 512} {
		b := newKBuilder()
		b.kernelKsym(nameLen, 0xffffffffc1000000, 0xffffffffc1000040, "bpf_prog_0123456789abcdef_one")
		b.kernelKsym(nameLen, 0xffffffffc1000040, 0xffffffffc1000050, "bpf_trampoline_6442450944")
		b.kernelKsym(nameLen, 0xffffffffc1002000, 0xffffffffc1002010, "bpf_prog_fedcba9876543210_three")
		s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: fakeLayout{}})
		require.NoError(t, err, "KSYM_NAME_LEN %d", nameLen)
		assert.Equal(t, []string{
			"ffffffffc1000000 t bpf_prog_0123456789abcdef_one [bpf] 64",
			"ffffffffc1000040 t bpf_trampoline_6442450944 [bpf] 16",
			"ffffffffc1002000 t bpf_prog_fedcba9876543210_three [bpf] 16",
		}, lines(t, s), "KSYM_NAME_LEN %d", nameLen)
	}
}

func TestBPFInferredLayoutRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *kbuilder)
	}{
		{"no bpf_ name", func(b *kbuilder) {
			b.kernelKsym(512, 0xffffffffc1000000, 0xffffffffc1000040, "prog_one")
		}},
		{"the last entry another layout", func(b *kbuilder) {
			b.kernelKsym(512, 0xffffffffc1000000, 0xffffffffc1000040, "bpf_prog_one")
			b.kernelKsym(128, 0xffffffffc1000040, 0xffffffffc1000080, "bpf_prog_two")
		}},
		{"a bad range", func(b *kbuilder) {
			b.kernelKsym(128, 0xffffffffc1000040, 0xffffffffc1000000, "bpf_prog_one")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newKBuilder()
			c.build(b)
			s, err := LoadBPF(b.mem, b.symbols(), Options{Target: le64, Layout: fakeLayout{}})
			assert.Nil(t, s)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMissingInfo)
			assert.ErrorIs(t, err, btflayout.ErrNotFound)
			assert.Contains(t, err.Error(), "inferring it: bpfsyms: ")
		})
	}
}
