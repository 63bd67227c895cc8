package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAppendHex(t *testing.T) {
	for _, v := range []uint64{0, 1, 0xf, 0x10, 0xdeadbeef, 0xffffffff81000000, ^uint64(0), 1 << 35} {
		for _, d := range []int{8, 16} {
			assert.Equal(t, fmt.Sprintf("%0*x", d, v), string(appendHex([]byte("x"), v, d))[1:], "%#x/%d", v, d)
		}
	}
}
