package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"os"
)

// Page descriptor flags of the kdump-compressed format.
var codecNames = []struct {
	flag uint32
	name string
}{{1, "zlib"}, {2, "lzo"}, {4, "snappy"}, {0x20, "zstd"}}

// DumpInfo describes one corpus file.
type DumpInfo struct {
	Format        string         `json:"format"` // "elf" or "kdump"
	Flattened     bool           `json:"flattened,omitempty"`
	HeaderVersion int32          `json:"header_version,omitempty"`
	Status        uint32         `json:"status,omitempty"`
	BlockSize     int32          `json:"block_size,omitempty"`
	DumpLevel     int32          `json:"dump_level,omitempty"`
	Split         int32          `json:"split,omitempty"`
	StartPFN      uint64         `json:"start_pfn,omitempty"`
	EndPFN        uint64         `json:"end_pfn,omitempty"`
	MaxMapnr      uint64         `json:"max_mapnr,omitempty"`
	Pages         uint64         `json:"pages,omitempty"` // page descriptors (kdump) or bytes/4096 in PT_LOADs (elf)
	Codecs        map[string]int `json:"codecs,omitempty"`
	// SharedDescs counts descriptors whose data offset other descriptors
	// share: makedumpfile's and QEMU's single all-zero page (with -d 31 the
	// zero pages excluded while writing still get that descriptor).
	SharedDescs  int    `json:"shared_descs,omitempty"`
	PTLoads      int    `json:"pt_loads,omitempty"`
	PTLoadFileSz uint64 `json:"pt_load_filesz,omitempty"`
	PTLoadMemSz  uint64 `json:"pt_load_memsz,omitempty"`
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func fileCodecs(path string) (*DumpInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	magic := make([]byte, 16)
	if _, err := f.ReadAt(magic, 0); err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(magic, []byte("\x7fELF")):
		e, err := readELF(f)
		if err != nil {
			return nil, err
		}
		info := &DumpInfo{Format: "elf"}
		for _, p := range e.phdrs {
			if p.typ == 1 {
				info.PTLoads++
				info.PTLoadFileSz += p.filesz
				info.PTLoadMemSz += p.memsz
			}
		}
		info.Pages = info.PTLoadFileSz / 4096
		return info, nil
	case bytes.HasPrefix(magic, []byte("KDUMP   ")):
		return kdumpInfo(f)
	case bytes.Equal(magic, []byte("makedumpfile\x00\x00\x00\x00")):
		data, err := unflatten(f)
		if err != nil {
			return nil, err
		}
		info, err := kdumpInfo(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		info.Flattened = true
		return info, nil
	}
	return nil, fmt.Errorf("%s: unknown format", path)
}

// unflatten replays the records of a flattened (makedumpfile -F) stream.
func unflatten(r io.ReaderAt) ([]byte, error) {
	var out []byte
	off := int64(4096)
	rec := make([]byte, 16)
	for {
		if _, err := r.ReadAt(rec, off); err != nil {
			return nil, fmt.Errorf("flattened record at %d: %w", off, err)
		}
		to, size := int64(binary.BigEndian.Uint64(rec)), int64(binary.BigEndian.Uint64(rec[8:]))
		if to == -1 && size == -1 {
			return out, nil
		}
		if to < 0 || size < 0 || size > 1<<30 || to+size > 1<<36 {
			return nil, fmt.Errorf("bad flattened record at %d", off)
		}
		if int64(len(out)) < to+size {
			out = append(out, make([]byte, to+size-int64(len(out)))...)
		}
		if _, err := r.ReadAt(out[to:to+size], off+16); err != nil {
			return nil, err
		}
		off += 16 + size
	}
}

// kdumpInfo reads a kdump-compressed file's header, bitmap and page
// descriptors, in the target's byte order (QEMU writes s390x files
// big-endian) and with the 32-bit header layout where the writer's long is 4
// bytes (i386: struct timeval of two 4-byte longs, the sub-header packed).
func kdumpInfo(r io.ReaderAt) (*DumpInfo, error) {
	h := make([]byte, 464)
	if _, err := r.ReadAt(h, 0); err != nil {
		return nil, err
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if le.Uint32(h[8:]) > 0xffff {
		bo = binary.BigEndian
	}
	// disk_dump_header: status, block_size, sub_hdr_size, bitmap_blocks,
	// max_mapnr at 424.. (64-bit) or 412.. (32-bit); sub-header dump_level,
	// split, start/end_pfn_64, max_mapnr_64.
	hs, subDL, subSplit, subStart, subEnd, subMax := 424, 8, 12, 80, 88, 96
	if bs := bo.Uint32(h[428:]); bs < 512 || bs > 1<<20 || bs&(bs-1) != 0 {
		hs, subDL, subSplit, subStart, subEnd, subMax = 412, 4, 8, 56, 64, 72
	}
	info := &DumpInfo{
		Format:        "kdump",
		HeaderVersion: int32(bo.Uint32(h[8:])),
		Status:        bo.Uint32(h[hs:]),
		BlockSize:     int32(bo.Uint32(h[hs+4:])),
		MaxMapnr:      uint64(bo.Uint32(h[hs+16:])),
		Codecs:        map[string]int{},
	}
	bs := int64(info.BlockSize)
	if bs < 512 || bs > 1<<20 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("bad block size %d", bs)
	}
	subBlocks := int64(bo.Uint32(h[hs+8:]))
	bmBlocks := int64(bo.Uint32(h[hs+12:]))
	sub := make([]byte, 104)
	if _, err := r.ReadAt(sub, bs); err != nil {
		return nil, err
	}
	info.DumpLevel = int32(bo.Uint32(sub[subDL:]))
	if info.HeaderVersion >= 6 {
		info.MaxMapnr = bo.Uint64(sub[subMax:])
	}
	info.StartPFN, info.EndPFN = 0, info.MaxMapnr
	if info.HeaderVersion >= 2 {
		info.Split = int32(bo.Uint32(sub[subSplit:]))
	}
	if info.Split != 0 && info.HeaderVersion >= 6 {
		info.StartPFN, info.EndPFN = bo.Uint64(sub[subStart:]), bo.Uint64(sub[subEnd:])
	}
	if info.EndPFN > uint64(bmBlocks*bs*8) {
		return nil, fmt.Errorf("pfn range beyond bitmap")
	}
	bm := make([]byte, bmBlocks*bs/2)
	if _, err := r.ReadAt(bm, (1+subBlocks)*bs+int64(len(bm))); err != nil {
		return nil, fmt.Errorf("2nd bitmap: %w", err)
	}
	var n uint64
	for pfn := info.StartPFN; pfn < info.EndPFN; {
		if pfn%64 == 0 && pfn+64 <= info.EndPFN {
			n += uint64(bits.OnesCount64(le.Uint64(bm[pfn/8:])))
			pfn += 64
			continue
		}
		if bm[pfn/8]&(1<<(pfn%8)) != 0 {
			n++
		}
		pfn++
	}
	info.Pages = n
	descs := make([]byte, 24*n)
	if _, err := r.ReadAt(descs, (1+subBlocks+bmBlocks)*bs); err != nil {
		return nil, fmt.Errorf("page descriptors: %w", err)
	}
	offs := map[uint64]int{}
	for i := uint64(0); i < n; i++ {
		offs[bo.Uint64(descs[24*i:])]++
	}
	for _, c := range offs {
		if c > 1 {
			info.SharedDescs += c
		}
	}
	for i := uint64(0); i < n; i++ {
		flags := bo.Uint32(descs[24*i+12:])
		name := fmt.Sprintf("flags_%#x", flags)
		if flags == 0 {
			name = "raw"
		}
		for _, c := range codecNames {
			if flags == c.flag {
				name = c.name
			}
		}
		info.Codecs[name]++
	}
	return info, nil
}
