package main

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
)

func TestDemangle(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"_RNvCs1234_7mycrate3foo", "mycrate::foo"},
		{"_RNvNtCsbDqzXfLQacH_4core3fmt5write", "core::fmt::write"},
		{"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
		{"vfs_write", "vfs_write"},
		{"_Rnot_valid", "_Rnot_valid"},
		{"_RNvCs1234_7mycrate3foo.llvm.123", "mycrate::foo.llvm.123"},
	} {
		assert.Equal(t, tc.want, demangleName(tc.in), tc.in)
	}
	c := common{demangle: true}
	s := symfinder.Symbol{Name: "_RNvCs1234_7mycrate3foo", Addr: 0x1000, Size: 0x20, Module: "rust_mod"}
	assert.Equal(t, "mycrate::foo+0x4/0x20 [rust_mod]", c.formatter()(s, 0x1004))
	c.demangle = false
	assert.Equal(t, "_RNvCs1234_7mycrate3foo+0x4/0x20 [rust_mod]", c.formatter()(s, 0x1004))
}
