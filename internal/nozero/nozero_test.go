package nozero

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestSlices(t *testing.T) {
	for _, n := range []int{0, -1, 1, 7, 4096, 1 << 20} {
		b := Bytes(n)
		require.Len(t, b, 0)
		require.Equal(t, max(n, 0), cap(b), "n=%d", n)
		b = append(b, make([]byte, max(n, 0))...)
		require.Len(t, b, max(n, 0))

		u := Uint32s(n)
		require.Len(t, u, 0)
		require.Equal(t, max(n, 0), cap(u))
		if n > 0 {
			require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(u)))%4, "aligned")
		}
		for i := range max(n, 0) {
			u = append(u, uint32(i))
		}
		for i, v := range u {
			require.Equal(t, uint32(i), v)
		}
	}
}

// TestSeparate checks that two buffers never share memory.
func TestSeparate(t *testing.T) {
	a, b := Bytes(64)[:64], Bytes(64)[:64]
	for i := range a {
		a[i] = 1
	}
	for i := range b {
		b[i] = 2
	}
	for _, v := range a {
		require.Equal(t, byte(1), v)
	}
}
