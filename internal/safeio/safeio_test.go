package safeio

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadAt(t *testing.T) {
	data := bytes.Repeat([]byte{7}, ChunkSize+100)
	r := bytes.NewReader(data)
	b, err := ReadAt(r, 10, 5)
	require.NoError(t, err)
	assert.Len(t, b, 10)
	b, err = ReadAt(r, ChunkSize+50, 50)
	require.NoError(t, err)
	assert.Equal(t, data[50:], b)
	_, err = ReadAt(r, 1<<40, 0)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadAt(r, 1<<63, 0)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadAt(r, 1, -1)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadAt(r, 200, ChunkSize)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestSliceCap(t *testing.T) {
	assert.Equal(t, 10, SliceCap(10, 8))
	assert.Equal(t, (1<<20)/8, SliceCap(1<<40, 8))
	assert.Equal(t, -1, SliceCap(1<<62, 8))
	assert.Equal(t, 5, SliceCap(5, 0))
}
