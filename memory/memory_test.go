package memory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/errshape"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flat is memory holding b at base; everything else is not saved.
func flat(base uint64, b []byte) Reader {
	return ReaderFunc(func(p []byte, addr uint64) (int, error) {
		if addr < base || addr-base >= uint64(len(b)) {
			return 0, Fault(addr, "test", "", ErrNotSaved)
		}
		n := copy(p, b[addr-base:])
		if n < len(p) {
			return n, Fault(addr+uint64(n), "test", "", ErrNotSaved)
		}
		return n, nil
	})
}

func TestReadHelpers(t *testing.T) {
	m := flat(0x1000, []byte{1, 0, 0, 0, 0, 0, 0, 0x80, 'h', 'i', 0, 'x'})
	v, err := Uint64(m, binary.LittleEndian, 0x1000)
	require.NoError(t, err)
	assert.EqualValues(t, uint64(0x8000000000000001), v)
	v32, err := Uint32(m, binary.BigEndian, 0x1000)
	require.NoError(t, err)
	assert.EqualValues(t, 0x01000000, v32)
	p, err := Target{ByteOrder: binary.LittleEndian, PtrSize: 4}.ReadPointer(m, 0x1004)
	require.NoError(t, err)
	assert.EqualValues(t, 0x80000000, p)
	_, err = Target{ByteOrder: binary.LittleEndian, PtrSize: 2}.ReadPointer(m, 0x1000)
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	s, err := CString(m, 0x1008, 10)
	require.NoError(t, err)
	assert.Equal(t, "hi", s)
	_, err = CString(m, 0x1008, 1)
	assert.ErrorIs(t, err, ErrCorrupt)
	_, err = CString(m, 0x100b, 100)
	assert.ErrorIs(t, err, ErrNotSaved)

	_, err = Uint64(m, binary.LittleEndian, 0x100a)
	var fe *FaultError
	require.ErrorAs(t, err, &fe)
	assert.EqualValues(t, 0x100c, fe.Addr)
	assert.ErrorIs(t, err, ErrNotSaved)
	assert.Equal(t, Space("test"), fe.Space)
	errshape.Require(t, err, "0x100c") // one line, naming the address

	err = ReadFull(m, make([]byte, 16), ^uint64(0)-3)
	assert.ErrorIs(t, err, ErrCorrupt)
	short := ReaderFunc(func(p []byte, addr uint64) (int, error) { return 1, nil })
	assert.ErrorIs(t, ReadFull(short, make([]byte, 4), 0), ErrNotSaved)
}

func TestRecorder(t *testing.T) {
	rec := NewRecorder(flat(0, make([]byte, 0x5000)), 12)
	_, _ = rec.ReadAt(make([]byte, 8), 0x1ffc)
	_, _ = rec.ReadAt(make([]byte, 1), 0x4000)
	_, _ = rec.ReadAt(make([]byte, 1), 0x9000) // a miss is recorded too
	_, _ = rec.ReadAt(nil, 0x7000)
	assert.Equal(t, []uint64{1, 2, 4, 9}, rec.Pages())
	_, _ = rec.ReadAt(make([]byte, 2), ^uint64(0))
	assert.Contains(t, rec.Pages(), ^uint64(0)>>12)
	rec.Reset()
	assert.Empty(t, rec.Pages())
}

// TestRemedies: remedies ride on an error through wrapping and joins, each
// once, without changing its message or matches.
func TestRemedies(t *testing.T) {
	base := WithRemedy(Classed("no BTF", ErrCorrupt), SupplyLayouts)
	err := errors.Join(fmt.Errorf("modules: %w", base), WithRemedy(errors.New("no arch"), SupplyArch, SupplyLayouts))
	assert.Equal(t, []Remedy{SupplyLayouts, SupplyArch}, Remedies(err))
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Equal(t, "no BTF", base.Error())
	assert.Nil(t, Remedies(errors.New("plain")))
	assert.Equal(t, "the architecture", SupplyArch.String())
}
