package vtop

// WalkForTest translates va by the page-table walk alone, bypassing the TLB
// and the fast paths, for the corpus test's cross-checks.
func WalkForTest(t Translator, va uint64) (uint64, error) {
	x := t.(*translator)
	if x.walk == nil {
		return 0, x.noWalk
	}
	return x.walk(va)
}
