package vmcore

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/diskdump"
)

// SplitGap is a range of page frames [Start, End) of a split dump that no
// part given covers: its pages read as absent.
type SplitGap struct{ Start, End uint64 }

// SplitInfo describes a split dump (makedumpfile --split) as opened: the
// pfn range of each part given, in pfn order, and the gaps the missing
// parts would fill. It is nil for a dump that is not split.
type SplitInfo struct {
	MaxMapnr uint64
	Parts    []diskdump.Part
	Gaps     []SplitGap
}

// Split returns the split-set view of a kdump-compressed dump written
// with --split, or nil.
func (d *Dump) Split() *SplitInfo {
	k := d.Kdump()
	if k == nil || !k.Header().Split {
		return nil
	}
	h := k.Header()
	si := &SplitInfo{MaxMapnr: h.MaxMapnr, Parts: h.Parts}
	next := uint64(0)
	for _, p := range h.Parts {
		if p.StartPFN > next {
			si.Gaps = append(si.Gaps, SplitGap{next, p.StartPFN})
		}
		next = max(next, p.EndPFN)
	}
	if next < h.MaxMapnr {
		si.Gaps = append(si.Gaps, SplitGap{next, h.MaxMapnr})
	}
	return si
}

// Describe says, for a set with gaps, which part (or parts) was given,
// of how many at least, and that the others go with --part.
func (si *SplitInfo) Describe() string {
	if len(si.Gaps) == 0 {
		return ""
	}
	// The parts given, numbered by where they sit among the gaps.
	type piece struct {
		start uint64
		given bool
	}
	var ps []piece
	for _, p := range si.Parts {
		ps = append(ps, piece{p.StartPFN, true})
	}
	for _, g := range si.Gaps {
		ps = append(ps, piece{g.Start, false})
	}
	slices.SortFunc(ps, func(a, b piece) int { return cmp.Compare(a.start, b.start) })
	var nums []int
	for i, p := range ps {
		if p.given {
			nums = append(nums, i+1)
		}
	}
	which := fmt.Sprintf("part %d", nums[0])
	if len(nums) > 1 {
		which = fmt.Sprintf("parts %v", nums)
	}
	p0 := si.Parts[0]
	return fmt.Sprintf("%s (pfns [%#x, %#x) of %#x) of a split dump of at least %d parts; the pages of the others read as absent",
		which, p0.StartPFN, p0.EndPFN, si.MaxMapnr, len(ps))
}

// maxSiblingEntries bounds how many directory entries SplitSiblings
// looks at.
const maxSiblingEntries = 4096

// SplitSiblings finds the other parts of the split dump whose part path
// is, beside it under the same name stem: the names that differ from it
// only in their last run of digits ("vmcore.1" → "vmcore.2",
// "dump-2.kdump" → "dump-1.kdump"), and whose headers say they are parts
// of the same split dump (same block size, max_mapnr and byte order, the
// same kernel utsname and time of writing, pfn ranges that do not
// overlap). It returns them in pfn order, without path itself; nil when
// path is not a split part or has no such sibling. See SplitSiblingsOf
// for the parts of other dumps it passes over.
func SplitSiblings(path string) []string {
	sibs, _ := SplitSiblingsOf(path)
	return sibs
}

// ForeignPart is a split part beside another under the same name stem that
// belongs to another dump, and why.
type ForeignPart struct {
	Path string
	Why  string
}

// SplitSiblingsOf is SplitSiblings, and also returns the split parts under
// the same name stem that belong to another dump (another kernel, boot or
// run of makedumpfile), so that a caller can say why they were not read.
func SplitSiblingsOf(path string) (sibs []string, foreign []ForeignPart) {
	// Only a regular file can be a part with siblings; opening a FIFO
	// here would wait for its writer.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil, nil
	}
	self, err := diskdump.Open(path)
	if err != nil {
		return nil, nil
	}
	h := self.Header()
	self.Close()
	if !h.Split || len(h.Parts) != 1 {
		return nil, nil
	}
	dir, base := filepath.Split(path)
	prefix, suffix, ok := digitStem(base)
	if !ok {
		return nil, nil
	}
	if dir == "" {
		dir = "."
	}
	dh, err := os.Open(dir)
	if err != nil {
		return nil, nil
	}
	ents, _ := dh.ReadDir(maxSiblingEntries)
	dh.Close()
	type sib struct {
		path  string
		start uint64
		end   uint64
	}
	all := []sib{{path, h.Parts[0].StartPFN, h.Parts[0].EndPFN}}
	for _, e := range ents {
		n := e.Name()
		if n == base || !e.Type().IsRegular() {
			continue
		}
		if p, s, ok := digitStem(n); !ok || p != prefix || s != suffix {
			continue
		}
		cand := filepath.Join(dir, n)
		d, err := diskdump.Open(cand)
		if err != nil {
			continue
		}
		ch := d.Header()
		d.Close()
		if !ch.Split || len(ch.Parts) != 1 {
			continue
		}
		if ch.BlockSize != h.BlockSize || ch.MaxMapnr != h.MaxMapnr || ch.ByteOrder != h.ByteOrder {
			foreign = append(foreign, ForeignPart{cand, fmt.Sprintf("a split part of another machine (block size %d, max_mapnr %#x)", ch.BlockSize, ch.MaxMapnr)})
			continue
		}
		if diff := diskdump.IdentityDiff(ch, h); diff != nil {
			foreign = append(foreign, ForeignPart{cand, fmt.Sprintf("a split part of another dump (against %s: %s)", base, strings.Join(diff, ", "))})
			continue
		}
		all = append(all, sib{cand, ch.Parts[0].StartPFN, ch.Parts[0].EndPFN})
	}
	slices.SortFunc(all, func(a, b sib) int { return cmp.Compare(a.start, b.start) })
	for i, s := range all {
		if i > 0 && s.start < all[i-1].end {
			return nil, foreign // overlapping parts: not one set
		}
		if s.path != path {
			sibs = append(sibs, s.path)
		}
	}
	return sibs, foreign
}

// digitStem splits a file name around its last run of digits.
func digitStem(name string) (prefix, suffix string, ok bool) {
	end := -1
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] >= '0' && name[i] <= '9' {
			end = i + 1
			break
		}
	}
	if end < 0 {
		return "", "", false
	}
	start := end - 1
	for start > 0 && name[start-1] >= '0' && name[start-1] <= '9' {
		start--
	}
	return name[:start], name[end:], true
}
