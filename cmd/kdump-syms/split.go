package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

// withSplitSiblings adds the other parts of a split dump given alone when
// they sit beside it under the same name stem, and says so on stderr.
func withSplitSiblings(paths []string, stderr io.Writer) []string {
	if len(paths) != 1 {
		return paths
	}
	sibs, foreign := vmcore.SplitSiblingsOf(paths[0])
	for _, f := range foreign {
		fmt.Fprintf(stderr, "kdump-syms: %s beside it is %s: not read\n", f.Path, f.Why)
	}
	if len(sibs) == 0 {
		return paths
	}
	fmt.Fprintf(stderr, "kdump-syms: %s is one part of a split dump; reading the other parts beside it too: %s\n", paths[0], strings.Join(sibs, ", "))
	return append(paths, sibs...)
}

// checkSplit reports a split dump opened without all its parts: which
// part was given, of how many at least, and that the others go with
// --part.
func (c *common) checkSplit(s *kdumpsyms.Session, first string) {
	if si := s.Dump().Split(); si != nil && len(si.Gaps) > 0 {
		c.rep.addFrom("split dump", memory.WithRemedy(fmt.Errorf("%s is %s", first, si.Describe()), memory.SupplySplitParts))
	}
}
