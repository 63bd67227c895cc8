package diskdump

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cases below are those libkdumpfile's generated test dumps exercise,
// rebuilt as our own fixtures.

// TestBigEndianHeaderError: a damaged big-endian header fails with the
// problem of its big-endian reading, not with the little-endian reading's
// implausible header_version.
func TestBigEndianHeaderError(t *testing.T) {
	b := newBuilder(6)
	b.bo, b.machine = binary.BigEndian, "s390x"
	file := b.fill(1, 2).build(t)
	binary.BigEndian.PutUint32(file[layout64.BitmapBlocks:], 1<<24) // far beyond the file
	_, err := NewDump(bytes.NewReader(file))
	var he *HeaderError
	require.True(t, errors.As(err, &he), "%v", err)
	assert.Equal(t, binary.BigEndian, he.ByteOrder)
	assert.Equal(t, 8, he.PtrSize)
	var fe *FormatError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, int64(layout64.BitmapBlocks), fe.Off)
	assert.Equal(t, uint64(1<<24), fe.Val)
	assert.ErrorIs(t, err, memory.ErrCorrupt)

	// A little-endian header with a broken version still says so.
	file = newBuilder(6).fill(1).build(t)
	binary.LittleEndian.PutUint32(file[offVersion:], 0x80000000)
	_, err = NewDump(bytes.NewReader(file))
	require.True(t, errors.As(err, &he), "%v", err)
	assert.Equal(t, binary.LittleEndian, he.ByteOrder)
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, int64(offVersion), fe.Off)
}

// TestEmptyMachineDump: a header-only dump of a machine with no pages
// (sub_hdr_size 0, bitmap_blocks 0, max_mapnr 0), otherwise consistent,
// is read: every page is absent.
func TestEmptyMachineDump(t *testing.T) {
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		b := newBuilder(6)
		b.bo, b.maxMapnr = bo, 0
		file := b.build(t)[:b.bs]
		bo.PutUint32(file[layout64.SubHdrSize:], 0)
		bo.PutUint32(file[layout64.BitmapBlocks:], 0)
		d, err := NewDump(bytes.NewReader(file))
		require.NoError(t, err, bo)
		assert.Equal(t, bo, d.Header().ByteOrder)
		assert.Zero(t, d.Header().MaxMapnr)
		_, err = d.ReadAt(make([]byte, 8), 0)
		assert.ErrorIs(t, err, memory.ErrNotSaved)
		require.NoError(t, d.Close())
	}
	// sub_hdr_size 0 alone, with pages: the bitmaps follow the header
	// block, and the pages read.
	b := newBuilder(1).fill(1, 2, 5)
	file := b.build(t)
	// Move the bitmaps and the rest up over the sub-header block.
	moved := append(bytes.Clone(file[:b.bs]), file[2*b.bs:]...)
	binary.LittleEndian.PutUint32(moved[layout64.SubHdrSize:], 0)
	fixDescOffsets(t, moved, b, -int64(b.bs))
	d, err := NewDump(bytes.NewReader(moved))
	require.NoError(t, err)
	defer d.Close()
	got := make([]byte, b.bs)
	_, err = d.ReadAt(got, 5*uint64(b.bs))
	require.NoError(t, err)
	assert.Equal(t, pageContent(5, b.bs), got)
}

// fixDescOffsets shifts the page descriptors' data offsets of a file made
// by b (one sub-header block, then the bitmaps) by delta, after the file
// lost its sub-header block.
func fixDescOffsets(t *testing.T, file []byte, b *builder, delta int64) {
	t.Helper()
	bs := int64(b.bs)
	bmBlocks := int64(binary.LittleEndian.Uint32(file[layout64.BitmapBlocks:]))
	desc := bs + bmBlocks*bs // header block, then the bitmaps
	for i := 0; i < len(b.stored); i++ {
		at := desc + int64(i)*pageDescSize
		off := int64(binary.LittleEndian.Uint64(file[at:]))
		binary.LittleEndian.PutUint64(file[at:], uint64(off+delta))
	}
}
