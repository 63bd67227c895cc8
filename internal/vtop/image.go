package vtop

import (
	"strings"

	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// maxImageSpan bounds how far past the anchor a VMCOREINFO SYMBOL() may lie
// and still count as part of the kernel image (vmlinux images are tens of
// MiB; linear-map values such as SYMBOL(mem_section) lie far away).
const maxImageSpan = 1 << 30

// imageRange returns the page-aligned range [lo, last] spanned by the
// VMCOREINFO SYMBOL()s lying in [anchor, anchor+maxImageSpan): every one of
// them is a vmlinux symbol, so the whole range is kernel image and is
// mapped linearly wherever the image is.
func imageRange(in *vmcoreinfo.Info, anchor, pageSize uint64) (lo, last uint64) {
	hi := anchor
	for _, l := range in.Lines() {
		if !strings.HasPrefix(l.Key, "SYMBOL(") {
			continue
		}
		v, ok := in.Symbol(strings.TrimSuffix(strings.TrimPrefix(l.Key, "SYMBOL("), ")"))
		if ok && v >= anchor && v-anchor < maxImageSpan && v > hi {
			hi = v
		}
	}
	return anchor &^ (pageSize - 1), hi | (pageSize - 1)
}

// levelName names a paging level counted from the leaf (1 = pte) in a
// walk of n levels, as Linux does with folded levels: the top is "pgd".
func levelName(l, n int) string {
	if l == n {
		return "pgd"
	}
	return x86Level[l]
}
