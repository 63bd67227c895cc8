package btflayout

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// BTF by scan: without CONFIG_KALLSYMS_ALL before v6.10, kallsyms has no
// __start_BTF/__stop_BTF, but the .BTF section is still there, at the end
// of the kernel's read-only data (RO_DATA in vmlinux.lds.h puts it after
// the kallsyms tables and before the init sections). ScanBTF reads that
// range page by page and takes a 4-byte-aligned BTF header only if it is
// self-consistent, the whole blob it describes parses, and the blob holds
// struct module.

// maxBTFScan bounds the range ScanBTF reads: the read-only data between the
// kallsyms tables and the init text is 5–15 MiB on distribution kernels.
const maxBTFScan = 96 << 20

// maxBTFCandidates bounds the headers that are parsed.
const maxBTFCandidates = 8

// ScanResult says where ScanBTF found the BTF.
type ScanResult struct {
	Addr, Size uint64
	// Lo and Hi are the range scanned, Read the bytes read and Skipped
	// the pages of it not in the dump.
	Lo, Hi        uint64
	Read, Skipped uint64
	Candidates    int
}

// ScanBTF finds the vmlinux BTF in kernel memory in [lo, hi) (hi is
// clamped to lo+96 MiB). Pages not in the dump are skipped.
//
// Finding no candidate that validates is an error wrapping ErrNoBTF that
// names the range and the candidates tried.
func ScanBTF(kmem memory.Reader, lo, hi uint64) (*BTF, ScanResult, error) {
	res := ScanResult{Lo: lo &^ 3, Hi: hi}
	if hi <= lo {
		return nil, res, fmt.Errorf("btflayout: BTF scan: empty range [%#x, %#x): %w", lo, hi, ErrNoBTF)
	}
	res.Hi = min(hi, res.Lo+maxBTFScan)
	// Read in large chunks (a kdump may compress 64 KiB blocks); a chunk
	// that faults is read again page by page, skipping what is absent.
	const page, chunkSize = 4096, 64 << 10
	buf := make([]byte, chunkSize)
	var lastErr error
	for at := res.Lo; at < res.Hi; {
		n := min(chunkSize-at%page, res.Hi-at)
		chunk := buf[:n]
		if memory.ReadFull(kmem, chunk, at) != nil {
			n = min(page-at%page, res.Hi-at)
			chunk = buf[:n]
			if memory.ReadFull(kmem, chunk, at) != nil {
				res.Skipped++
				at += n
				continue
			}
		}
		res.Read += n
		for o := uint64(0); o+4 <= n; o += 4 {
			c := chunk[o:]
			if !(c[0] == 0x9f && c[1] == 0xeb || c[0] == 0xeb && c[1] == 0x9f) || c[2] != 1 || c[3] != 0 {
				continue
			}
			start := at + o
			var hdr [btfHeaderLen]byte
			if memory.ReadFull(kmem, hdr[:], start) != nil {
				continue
			}
			bo, total, err := header(hdr[:])
			if err != nil {
				continue
			}
			// pahole writes types at 0 and strings right after them.
			typeOff, typeLen, strOff := bo.Uint32(hdr[8:]), bo.Uint32(hdr[12:]), bo.Uint32(hdr[16:])
			if typeOff != 0 || strOff < typeLen || start+total > hi || start+total < start {
				continue
			}
			if res.Candidates++; res.Candidates > maxBTFCandidates {
				return nil, res, fmt.Errorf("btflayout: BTF scan of [%#x, %#x): %d candidate headers failed (last: %v): %w", res.Lo, res.Hi, maxBTFCandidates, lastErr, ErrNoBTF)
			}
			b, err := FromMemory(kmem, start, start+total)
			if err == nil {
				_, err = b.Struct("module", "name")
			}
			if err != nil {
				lastErr = fmt.Errorf("at %#x: %w", start, err)
				continue
			}
			b.desc = fmt.Sprintf("vmlinux BTF in the dump at %#x (found by scanning [%#x, %#x))", start, res.Lo, res.Hi)
			res.Addr, res.Size = start, total
			return b, res, nil
		}
		at += n
	}
	if lastErr != nil {
		return nil, res, fmt.Errorf("btflayout: BTF scan of [%#x, %#x): %d candidate headers, none valid (last: %v): %w", res.Lo, res.Hi, res.Candidates, lastErr, ErrNoBTF)
	}
	return nil, res, fmt.Errorf("btflayout: BTF scan of [%#x, %#x) (%d bytes read, %d pages not in the dump): no BTF header: %w", res.Lo, res.Hi, res.Read, res.Skipped, ErrNoBTF)
}
