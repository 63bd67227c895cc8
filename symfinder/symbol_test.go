package symfinder

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSymbolPrints(t *testing.T) {
	s := Symbol{Name: "xfs_file_write_iter", Addr: 0xffffffffc0568380, Size: 0x120, Kind: 't', Module: "xfs"}
	assert.Equal(t, "xfs_file_write_iter (t) 0xffffffffc0568380/0x120 [xfs]", s.String())
	assert.Equal(t, "xfs_file_write_iter+0x5e/0x120 [xfs]", s.Format(0xffffffffc05683de))
	assert.Equal(t, "t", fmt.Sprint(s.Kind))
	assert.Equal(t, "T", Kind('T').String())
	v := Symbol{Name: "vfs_write", Addr: 0xffffffff81370620, Size: 0x440, Kind: 'T'}
	assert.Equal(t, "vfs_write (T) 0xffffffff81370620/0x440", fmt.Sprint(v))

	var zero Symbol
	assert.True(t, zero.IsZero())
	assert.False(t, s.IsZero())
	assert.Equal(t, "<no symbol>", zero.String())
	assert.Equal(t, "?", zero.Format(0x1234), "a zero Symbol is no hit")
}
