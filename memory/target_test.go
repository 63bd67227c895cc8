package memory

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTargetCheck(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	for _, tc := range []struct {
		name  string
		t     Target
		want  error // of Check; nil: passes
		paged error // of CheckPaged
	}{
		{"zero", Target{}, ErrUnknownTarget, ErrUnknownTarget},
		{"no order", Target{PtrSize: 8, PageSize: 4096}, ErrUnknownTarget, ErrUnknownTarget},
		{"no pointer size", Target{ByteOrder: le, PageSize: 4096}, ErrUnknownTarget, ErrUnknownTarget},
		{"pointer size 2", Target{ByteOrder: le, PtrSize: 2}, errors.ErrUnsupported, errors.ErrUnsupported},
		{"no page size", Target{ByteOrder: le, PtrSize: 8}, nil, ErrUnknownTarget},
		{"page size 3000", Target{ByteOrder: be, PtrSize: 8, PageSize: 3000}, errors.ErrUnsupported, errors.ErrUnsupported},
		{"page size 2 GiB", Target{ByteOrder: be, PtrSize: 8, PageSize: 2 << 30}, errors.ErrUnsupported, errors.ErrUnsupported},
		{"page size -4096", Target{ByteOrder: be, PtrSize: 8, PageSize: -4096}, errors.ErrUnsupported, errors.ErrUnsupported},
		{"x86_64", Target{ByteOrder: le, PtrSize: 8, PageSize: 4096}, nil, nil},
		{"arm64 64k", Target{ByteOrder: le, PtrSize: 8, PageSize: 64 << 10}, nil, nil},
		{"i386", Target{ByteOrder: le, PtrSize: 4, PageSize: 4096}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				err, want error
			}{{tc.t.Check(), tc.want}, {tc.t.CheckPaged(), tc.paged}} {
				if c.want == nil {
					assert.NoError(t, c.err)
				} else {
					assert.ErrorIs(t, c.err, c.want)
				}
			}
		})
	}
}

func TestTargetDecode(t *testing.T) {
	b := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	le := Target{ByteOrder: binary.LittleEndian, PtrSize: 8}
	be32 := Target{ByteOrder: binary.BigEndian, PtrSize: 4}
	assert.EqualValues(t, 0x0807060504030201, le.Pointer(b))
	assert.EqualValues(t, 0x01020304, be32.Pointer(b))
	for n, want := range map[int]uint64{1: 1, 2: 0x0102, 4: 0x01020304, 8: 0x0102030405060708, 3: 0} {
		assert.Equal(t, want, be32.Uint(b[:n]), n)
	}

	m := flat(0x1000, b)
	v, err := be32.ReadPointer(m, 0x1004)
	require.NoError(t, err)
	assert.EqualValues(t, 0x05060708, v)
	_, err = le.ReadPointer(m, 0x1004)
	assert.ErrorIs(t, err, ErrNotSaved)
	_, err = Target{}.ReadPointer(m, 0x1000)
	assert.ErrorIs(t, err, ErrUnknownTarget)
}

// TestTargetOr: the fields a Target leaves unknown come from the other,
// the ones it knows stay.
func TestTargetOr(t *testing.T) {
	be := Target{ByteOrder: binary.BigEndian}
	d := Target{ByteOrder: binary.LittleEndian, PtrSize: 8, PageSize: 4096}
	got := be.Or(d)
	if got.ByteOrder != binary.ByteOrder(binary.BigEndian) || got.PtrSize != 8 || got.PageSize != 4096 {
		t.Errorf("Or: %+v", got)
	}
	if got := (Target{}).Or(Target{}); got != (Target{}) {
		t.Errorf("zero Or zero: %+v", got)
	}
	if got := d.Or(Target{ByteOrder: binary.BigEndian, PtrSize: 4, PageSize: 65536}); got != d {
		t.Errorf("a known Target changed: %+v", got)
	}
}
