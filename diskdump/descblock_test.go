package diskdump

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingReader counts the reads made of a file.
type countingReader struct {
	r     *bytes.Reader
	reads atomic.Int64
}

func (c *countingReader) Size() int64 { return c.r.Size() }

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.r.ReadAt(p, off)
}

// TestDescriptorBlocks: a read of many consecutive pages reads the page
// descriptor table a block at a time and the pages' data a run at a time,
// not a read or two per page, and gives the same bytes as page-by-page
// reads, at the table's end too. Compressed runs: TestSpanCodecs.
func TestDescriptorBlocks(t *testing.T) {
	const pages = 3*256 + 17 // blocks, and one cut short by the data's end
	bl := newBuilder(6)
	bl.maxMapnr = pages + 8
	for pfn := range uint64(pages) {
		bl.pages[pfn] = benchContent(pfn)
	}
	file := bl.build(t)
	got, reads := readCounted(t, file, pages)
	// Four reads of the descriptor table, one of the data of each batch of
	// pages back to back in the file (readMany decodes 256 at a time), a
	// few for the partial pages at the ends: not one or two per page.
	require.LessOrEqual(t, reads, int64(12), "reads of the file")
	for pfn := range uint64(pages) {
		if !bytes.Equal(got[pfn*4096:(pfn+1)*4096], bl.pages[pfn]) {
			t.Fatalf("pfn %#x differs", pfn)
		}
	}
	// Page by page, backwards: each descriptor outside the block read anew.
	one := openBytes(t, file)
	buf := make([]byte, 4096)
	for pfn := uint64(pages); pfn > 0; pfn-- {
		_, err := one.ReadAt(buf, (pfn-1)*4096)
		require.NoError(t, err)
		if !bytes.Equal(buf, bl.pages[pfn-1]) {
			t.Fatalf("pfn %#x differs read alone", pfn-1)
		}
	}
}

// TestSpanCodecs: runs of compressed pages read at once decode as the
// pages read alone do, for every codec, with pages stored raw among them
// (makedumpfile stores a page raw when it does not compress).
func TestSpanCodecs(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			const pages = 300
			bl := newBuilder(6)
			bl.maxMapnr = pages + 8
			for pfn := range uint64(pages) {
				bl.pages[pfn] = benchContent(pfn)
			}
			bl.codec = func(pfn uint64) uint32 {
				if pfn%7 == 3 {
					return 0
				}
				return c.flag
			}
			got, reads := readCounted(t, bl.build(t), pages)
			if c.flag != 0 {
				// Raw pages between compressed ones end runs: one read per
				// run, still far fewer than one per page.
				require.Less(t, reads, int64(pages/2), "reads of the file")
			}
			for pfn := range uint64(pages) {
				if !bytes.Equal(got[pfn*4096:(pfn+1)*4096], bl.pages[pfn]) {
					t.Fatalf("pfn %#x differs", pfn)
				}
			}
		})
	}
}

// readCounted opens the dump file and reads its first pages pages in one
// read, returning them and how many reads of the file that took.
func readCounted(t *testing.T, file []byte, pages int) ([]byte, int64) {
	t.Helper()
	cr := &countingReader{r: bytes.NewReader(file)}
	d, err := NewDump(cr)
	require.NoError(t, err)
	before := cr.reads.Load()
	got := make([]byte, pages*4096)
	n, err := d.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, len(got), n)
	return got, cr.reads.Load() - before
}

// TestSharedPages: the pages of a batch that share one stored page (the
// zero page QEMU and makedumpfile below dump level 1 store once) are read
// once per batch, raw or compressed, and give the same bytes as pages read
// alone; when the shared page does not decode, none of them reads as
// zeros.
func TestSharedPages(t *testing.T) {
	for _, c := range []struct {
		name string
		flag uint32
	}{{"raw", 0}, {"zlib", StatusZlib}} {
		t.Run(c.name, func(t *testing.T) {
			const pages = 600
			bl := newBuilder(6)
			bl.maxMapnr = pages + 8
			for pfn := range uint64(pages) {
				bl.pages[pfn] = make([]byte, 4096)
				if pfn%50 == 7 {
					bl.pages[pfn] = benchContent(pfn)
				}
			}
			bl.codec = func(uint64) uint32 { return c.flag }
			file := bl.build(t)
			got, reads := readCounted(t, file, pages)
			// Three batches of at most 256 pages: a read of the shared
			// page and of each distinct page, a few of descriptors.
			require.Less(t, reads, int64(pages/10), "reads of the file")
			for pfn := range uint64(pages) {
				if !bytes.Equal(got[pfn*4096:(pfn+1)*4096], bl.pages[pfn]) {
					t.Fatalf("pfn %#x differs", pfn)
				}
			}
			if c.flag == 0 {
				return
			}
			// Corrupt the shared zero page's data: the first zero pfn's
			// read fails, naming it, and so does a read of a later one.
			require.Positive(t, bl.zeroAt)
			bad := bytes.Clone(file)
			bad[bl.zeroAt+2] ^= 0xff
			d, err := NewDump(bytes.NewReader(bad))
			require.NoError(t, err)
			buf := make([]byte, pages*4096)
			n, err := d.ReadAt(buf, 0)
			require.Error(t, err)
			require.Zero(t, n, "pfn 0 is a zero page")
			_, err = d.ReadAt(buf[:100*4096], 100*4096)
			require.ErrorContains(t, err, "pfn 0x64")
		})
	}
}
