package testutil

import "sync"

// GuestDump is one dump of a guest: the full dump of the cache where there
// is one, else the committed extract.
type GuestDump struct {
	Format  DumpFormat
	Paths   []string
	Extract bool // a committed extract: only the pages decoding reads
}

var guestDumps struct {
	sync.Mutex
	byGuest map[string][]GuestDump
}

// Dumps returns the guest's available dumps, in AvailableDumps order:
// what DumpPaths and IsExtract say of each format, found once per test
// process (each committed extract is hashed to find its decompressed
// copy). Callers must not modify the result.
func (g *CorpusGuest) Dumps() []GuestDump {
	key := g.Dir + "\x00" + g.CacheDir
	guestDumps.Lock()
	defer guestDumps.Unlock()
	if d, ok := guestDumps.byGuest[key]; ok {
		return d
	}
	var out []GuestDump
	for _, f := range g.AvailableDumps() {
		if paths, ok := g.FullDumpPaths(f); ok {
			out = append(out, GuestDump{Format: f, Paths: paths})
		} else if paths, ok := g.ExtractPaths(f); ok {
			out = append(out, GuestDump{Format: f, Paths: paths, Extract: true})
		}
	}
	if guestDumps.byGuest == nil {
		guestDumps.byGuest = map[string][]GuestDump{}
	}
	guestDumps.byGuest[key] = out
	return out
}

// Dump returns the guest's dump of format f, if it has one.
func (g *CorpusGuest) Dump(f DumpFormat) (GuestDump, bool) {
	for _, d := range g.Dumps() {
		if d.Format == f {
			return d, true
		}
	}
	return GuestDump{}, false
}
