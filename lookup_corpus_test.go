package kdumpsyms_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kernelOracle answers lookups by address from a guest's captured
// /proc/kallsyms and its modules' memory regions, written straight from
// the kernel's own code: kernel/kallsyms.c is_ksym_addr and
// get_symbol_pos for vmlinux, kernel/module/kallsyms.c
// find_kallsyms_symbol (within __module_address's regions) for modules.
type kernelOracle struct {
	vm       []testutil.KallsymsEntry // vmlinux symbols sorted by address, stable
	ranges   [][2]uint64              // [start, end) or [start, end] (inclusive)
	incl     bool
	sections map[string]uint64 // the first address of each of sectionNames
	mods     []oracleModule
}

type oracleModule struct {
	name    string
	regions [][2]uint64 // [start, end)
	// syms are the module's symbols find_kallsyms_symbol considers:
	// mapping and absolute symbols are left out once, here.
	syms []testutil.KallsymsEntry
	// byAddr is syms sorted by address, stably (file order within an
	// address), for lookup's binary searches; syms keeps file order.
	byAddr []testutil.KallsymsEntry
}

type oracleHit struct {
	name, module string
	addr, size   uint64
}

func (h oracleHit) String() string {
	if h.name == "" {
		return "not found"
	}
	s := fmt.Sprintf("%s@%#x/%#x", h.name, h.addr, h.size)
	if h.module != "" {
		s += " [" + h.module + "]"
	}
	return s
}

// release parses "major.minor" of a uname -r.
func releaseOf(uname string) (int, int) {
	maj, rest, _ := strings.Cut(uname, ".")
	min, _, _ := strings.Cut(rest, ".")
	a, _ := strconv.Atoi(maj)
	b, _ := strconv.Atoi(min)
	return a, b
}

// sectionNames are the vmlinux symbols the oracle and the probes use.
var sectionNames = []string{"_text", "_stext", "_etext", "_sinittext", "_einittext", "_end", "__per_cpu_start", "__per_cpu_end"}

func newKernelOracle(t *testing.T, g *testutil.CorpusGuest, set *modsyms.Set) *kernelOracle {
	o := &kernelOracle{sections: map[string]uint64{}}
	maj, min := releaseOf(g.Uname(t))
	o.incl = maj < 5 || maj == 5 && min < 16
	byMod := map[string]*oracleModule{}
	entries := g.Kallsyms(t)
	o.vm = make([]testutil.KallsymsEntry, 0, len(entries))
	for _, e := range entries {
		switch e.Kind {
		case testutil.SymVmlinux:
			o.vm = append(o.vm, e)
			if _, dup := o.sections[e.Name]; !dup && slices.Contains(sectionNames, e.Name) {
				o.sections[e.Name] = e.Addr
			}
		case testutil.SymModule:
			m := byMod[e.Module]
			if m == nil {
				m = &oracleModule{name: e.Module}
				byMod[e.Module] = m
			}
			if !isMapping(e.Name) && e.Type != 'a' && e.Type != 'A' {
				m.syms = append(m.syms, e)
			}
		}
	}
	byAddr := func(a, b testutil.KallsymsEntry) int { return cmp.Compare(a.Addr, b.Addr) }
	if !slices.IsSortedFunc(o.vm, byAddr) { // it is, as the kernel prints it
		slices.SortStableFunc(o.vm, byAddr)
	}
	sec := o.sections
	if g.Manifest.KallsymsAll {
		o.ranges = [][2]uint64{{sec["_stext"], sec["_end"]}}
	} else {
		o.ranges = [][2]uint64{{sec["_stext"], sec["_etext"]}, {sec["_sinittext"], sec["_einittext"]}}
	}
	if set != nil {
		for _, m := range set.Modules() {
			om := byMod[m.Name]
			if om == nil {
				continue
			}
			for _, r := range m.Regions {
				if r.Size == 0 {
					continue
				}
				if r.TextSize > 0 && r.TextSize < r.Size { // module_layout: text, then the rest
					om.regions = append(om.regions, [2]uint64{r.Base, r.Base + r.TextSize}, [2]uint64{r.Base + r.TextSize, r.Base + r.Size})
				} else {
					om.regions = append(om.regions, [2]uint64{r.Base, r.Base + r.Size})
				}
			}
			om.byAddr = slices.Clone(om.syms)
			slices.SortStableFunc(om.byAddr, func(a, b testutil.KallsymsEntry) int { return cmp.Compare(a.Addr, b.Addr) })
			o.mods = append(o.mods, *om)
		}
	}
	return o
}

func isMapping(name string) bool {
	return strings.HasPrefix(name, "$") || strings.HasPrefix(name, ".L") || strings.HasPrefix(name, "L0")
}

func (o *kernelOracle) lookup(a uint64) oracleHit {
	for _, r := range o.ranges {
		if a >= r[0] && (a < r[1] || o.incl && a == r[1]) {
			return o.vmlinux(a)
		}
	}
	for _, m := range o.mods {
		for _, r := range m.regions {
			if a >= r[0] && a < r[1] {
				return m.lookup(a, r)
			}
		}
	}
	return oracleHit{}
}

// vmlinux is get_symbol_pos.
func (o *kernelOracle) vmlinux(a uint64) oracleHit {
	low := sortSearch(len(o.vm), func(i int) bool { return o.vm[i].Addr > a }) - 1
	if low < 0 {
		return oracleHit{}
	}
	for low > 0 && o.vm[low-1].Addr == o.vm[low].Addr {
		low--
	}
	start := o.vm[low].Addr
	var end uint64
	for i := low + 1; i < len(o.vm); i++ {
		if o.vm[i].Addr > start {
			end = o.vm[i].Addr
			break
		}
	}
	if end == 0 {
		switch ei := o.sections["_einittext"]; {
		case a >= o.sections["_sinittext"] && a < ei:
			end = ei
		case o.sections["_end"] != 0:
			end = o.sections["_end"]
		default:
			end = o.sections["_etext"]
		}
	}
	return oracleHit{name: o.vm[low].Name, addr: start, size: end - start}
}

// lookup is find_kallsyms_symbol, with the best symbol inside the region
// of the address and the next one bounded by that region's end. The
// kernel walks the symbols in order, keeping the first of the highest
// address at or below a and the lowest address above it; over the
// symbols sorted stably by address those are the first of the run just
// below the first symbol above a, and that symbol.
func (m *oracleModule) lookup(a uint64, r [2]uint64) oracleHit {
	syms := m.byAddr
	above := sortSearch(len(syms), func(i int) bool { return syms[i].Addr > a })
	next := r[1]
	if above < len(syms) && syms[above].Addr < next {
		next = syms[above].Addr
	}
	if above == 0 {
		return oracleHit{}
	}
	best := sortSearch(above, func(i int) bool { return syms[i].Addr >= syms[above-1].Addr })
	if syms[best].Addr < r[0] {
		return oracleHit{}
	}
	b := syms[best]
	return oracleHit{name: b.Name, module: m.name, addr: b.Addr, size: next - b.Addr}
}

func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// probeAddrs draws addresses in and around every kind of region: symbol
// starts, ends and interiors of vmlinux and module symbols, range and
// region edges, the per-CPU area, and addresses no symbol covers (user
// space, zero, the direct map, vmalloc, the top of memory).
func (o *kernelOracle) probeAddrs(arch string, rng *rand.Rand) []uint64 {
	var out []uint64
	around := func(a uint64) { out = append(out, a-1, a, a+1) }
	pick := func(n int, f func(int)) {
		for range 1500 {
			f(rng.IntN(n))
		}
	}
	pick(len(o.vm), func(i int) {
		a := o.vm[i].Addr
		around(a)
		if i+1 < len(o.vm) && o.vm[i+1].Addr > a {
			out = append(out, a+rng.Uint64N(o.vm[i+1].Addr-a), o.vm[i+1].Addr-1)
		}
	})
	for _, r := range o.ranges {
		around(r[0])
		around(r[1])
	}
	for _, n := range []string{"__per_cpu_start", "__per_cpu_end", "_text", "_sinittext", "_einittext", "_etext", "_end"} {
		if a, ok := o.sections[n]; ok {
			around(a)
		}
	}
	if pce, ok := o.sections["__per_cpu_end"]; ok && pce > 0 && pce < 1<<32 {
		for range 300 {
			out = append(out, rng.Uint64N(pce+1))
		}
	}
	var all []testutil.KallsymsEntry
	for _, m := range o.mods {
		all = append(all, m.syms...)
		for _, r := range m.regions {
			around(r[0])
			around(r[1])
			out = append(out, r[0]+rng.Uint64N(r[1]-r[0]))
		}
	}
	if len(all) > 0 {
		pick(len(all), func(i int) {
			a := all[i].Addr
			around(a)
			out = append(out, a+rng.Uint64N(64))
		})
	}
	// Addresses no symbol covers, per architecture's layout.
	spans := [][2]uint64{{0, 1 << 47}, {0, 1 << 20}}
	switch arch {
	case "amd64":
		spans = append(spans,
			[2]uint64{0xffff888000000000, 0xffffc87fffffffff}, // direct map (and KASLR'd below)
			[2]uint64{0xffffc90000000000, 0xffffe8ffffffffff}, // vmalloc, vmalloc'd stacks
			[2]uint64{0xffffea0000000000, 0xffffeaffffffffff}, // vmemmap
			[2]uint64{0xffffffffc0000000, 0xfffffffffeffffff}, // module area
		)
	case "arm64":
		spans = append(spans,
			[2]uint64{0xffff000000000000, 0xffff7fffffffffff}, // linear map
			[2]uint64{0xffff800000000000, 0xffff80007fffffff}, // modules (without KASLR)
			[2]uint64{0xffff800080000000, 0xfffffbffefffffff}, // vmalloc
		)
	case "i386":
		spans = append(spans,
			[2]uint64{0xc0000000, 0xc1000000}, // the direct map below the kernel
			[2]uint64{0xd0000000, 0xff000000}, // vmalloc (modules among it)
		)
	case "armhf":
		spans = append(spans,
			[2]uint64{0xbf000000, 0xc0000000}, // modules
			[2]uint64{0xc0000000, 0xc0400000}, // the linear map below the kernel
			[2]uint64{0xd0800000, 0xff800000}, // vmalloc
		)
	case "s390x":
		spans = append(spans,
			[2]uint64{0x100000, 0x10000000},         // the identity map
			[2]uint64{0x3ff00000000, 0x3fffe000000}, // vmalloc (modules among it)
		)
	case "ppc64el":
		spans = append(spans,
			[2]uint64{0xc000000000000000, 0xc000000010000000}, // the linear map (the image at its start)
			[2]uint64{0xc008000000000000, 0xc008000100000000}, // vmalloc (modules, BPF among it)
		)
	}
	for _, s := range spans {
		for range 200 {
			out = append(out, s[0]+rng.Uint64N(s[1]-s[0]))
		}
	}
	out = append(out, 0, 1, 0xffffffffffffffff, 0xfffffffffffff000)
	return out
}

// TestLookupKernelRules answers thousands of addresses on every corpus
// dump exactly as the kernel's own rules give them from the captured
// /proc/kallsyms and the modules' regions (the regions are the dump's,
// checked against the captured /proc/modules): the symbol, its address
// and the kernel's size, or not found. The same addresses go through the
// captured /proc/kallsyms as a file source, which must agree wherever it
// answers and never answer what the kernel would not.
func TestLookupKernelRules(t *testing.T) {
	for _, g := range testutil.Corpus(t) {
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			s, _ := oneDumpSession(t, g, false)
			// Every guest: without KALLSYMS_ALL the module list and
			// layouts come from scans and inference.
			set, err := s.Modules()
			require.NoError(t, err)
			checkRegionsAgainstProcModules(t, g, set)
			o := newKernelOracle(t, g, set)
			chain := chainOf(t, s, kdumpsyms.FinderKallsyms, kdumpsyms.FinderModules)

			file, err := symfinder.ParseKallsyms(bytes.NewReader(g.KallsymsText(t)), "file")
			require.NoError(t, err)

			// A System.map of the same kernel, at link-time addresses.
			slide, _ := s.KASLROffset()
			smap := make([]byte, 0, 48*len(o.vm))
			text := o.sections["_text"]
			for _, e := range o.vm {
				a := e.Addr
				if e.Type != 'A' && e.Type != 'a' && a >= text {
					a -= slide
				}
				smap = appendKallsymsLine(smap, symfinder.Symbol{Addr: a, Kind: symfinder.Kind(e.Type), Name: e.Name}, 16)
			}
			sysmap, err := symfinder.ParseSystemMap(bytes.NewReader(smap), "System.map", slide)
			require.NoError(t, err)

			rng := rand.New(rand.NewPCG(1, uint64(len(g.Name))))
			addrs := o.probeAddrs(g.Arch(), rng)

			// The lazy kallsyms finder answers the same.
			ls, _ := oneDumpSession(t, g, true)
			lazyChain := chainOf(t, ls, kdumpsyms.FinderKallsyms, kdumpsyms.FinderModules)
			lazyBad := 0
			for _, a := range addrs {
				want := o.lookup(a)
				if want.size > 1<<62 {
					// Before 5.16 without KALLSYMS_ALL the kernel answers
					// _einittext itself, with _etext - _einittext as its
					// size (a negative number); we give size 0.
					continue
				}
				var got oracleHit
				if sym, err := lazyChain.Lookup(a); err == nil {
					got = oracleHit{name: sym.Name, module: sym.Module, addr: sym.Addr, size: sym.Size}
				}
				if got != want && lazyBad < 10 {
					t.Errorf("%#x: lazy gives %v, the kernel %v", a, got, want)
					lazyBad++
				}
			}
			found, missing, fileAnswered := 0, 0, 0
			bad := 0
			for _, a := range addrs {
				want := o.lookup(a)
				if want.size > 1<<62 {
					continue // the kernel's negative size, as above
				}
				var got oracleHit
				if sym, err := chain.Lookup(a); err == nil {
					got = oracleHit{name: sym.Name, module: sym.Module, addr: sym.Addr, size: sym.Size}
				} else if !errors.Is(err, symfinder.ErrNotFound) {
					t.Fatalf("%#x: %v", a, err)
				}
				if want.name == "" {
					missing++
				} else {
					found++
				}
				if got != want && bad < 20 {
					t.Errorf("%#x: dump gives %v, the kernel %v", a, got, want)
					bad++
				}
				// The file source: vmlinux exactly (it takes the 5.16+
				// range ends), modules by name and offset, never more.
				var fh oracleHit
				if hit, ok := bestHit(file, a); ok {
					fh = oracleHit{name: hit.Name, module: hit.Module, addr: hit.Addr, size: hit.Size}
					fileAnswered++
				}
				if o.incl && want.name != "" && want.module == "" && fh.name == "" {
					continue // a range's last address, which only kernels before 5.16 answer
				}
				if want.name == "" && (fh.module == "bpf" || strings.HasPrefix(fh.module, "__builtin__")) {
					// A pseudo-module's symbol (a kprobe page, a BPF
					// program), which this oracle leaves to the block
					// below.
					fh = oracleHit{}
				}
				// The System.map: vmlinux exactly, modules not at all.
				var mh oracleHit
				if hit, ok := bestHit(sysmap, a); ok {
					mh = oracleHit{name: hit.Name, module: hit.Module, addr: hit.Addr, size: hit.Size}
				}
				if wm := want; (wm.module == "" && mh != wm || wm.module != "" && mh.name != "") && bad < 20 {
					t.Errorf("%#x: System.map gives %v, the kernel %v", a, mh, want)
					bad++
				}
				if want.module == "" && fh.module == "" {
					if fh != want && bad < 20 {
						t.Errorf("%#x: file gives %v, the kernel %v", a, fh, want)
						bad++
					}
				} else if fh.name != "" && (fh.name != want.name || fh.module != want.module || fh.addr != want.addr) && bad < 20 {
					t.Errorf("%#x: file gives %v, the kernel %v", a, fh, want)
					bad++
				}
			}
			t.Logf("%d addresses: %d in a symbol, %d in none; the file answered %d", len(addrs), found, missing, fileAnswered)

			// Pseudo-modules (BPF programs and trampolines, ftrace
			// trampolines, kprobe pages) cover their exact ranges: each
			// answers at its start and, where it has one, not at its end
			// (without KALLSYMS_ALL their list heads are found through
			// the code that uses them).
			{
				chain := chainOf(t, s, kdumpsyms.FinderKallsyms, kdumpsyms.FinderModules,
					kdumpsyms.FinderFtrace, kdumpsyms.FinderBPF, kdumpsyms.FinderKprobes)
				pseudo := 0
				for _, e := range g.Kallsyms(t) {
					if e.Kind != testutil.SymBPF && e.Kind != testutil.SymPseudo {
						continue
					}
					sym, err := chain.Lookup(e.Addr)
					if !assert.NoError(t, err, "%s [%s]", e.Name, e.Module) {
						continue
					}
					if want := o.lookup(e.Addr); want.name != "" && want.module == "" {
						// Inside the kernel image (ppc64's
						// kprobe_optinsn_page is the optinsn_slot
						// buffer in .text): the kernel's lookup asks
						// the core kernel first.
						assert.Equal(t, want.name, sym.Name, e.Name)
						assert.Empty(t, sym.Module, e.Name)
						continue
					}
					pseudo++
					assert.Equal(t, e.Module, sym.Module, e.Name)
					assert.Equal(t, e.Addr, sym.Addr, e.Name)
					assert.False(t, sym.SizeDerived, e.Name)
					if sym.Size > 0 {
						if end, err := chain.Lookup(e.Addr + sym.Size); err == nil {
							assert.NotEqual(t, sym.Name, end.Name, "%s reaches past its end", e.Name)
						}
					}
				}
				t.Logf("%d pseudo-module symbols", pseudo)
			}

			// Per-CPU symbols end with the per-CPU area, through the dump
			// and through the file.
			if pce, ok := o.sections["__per_cpu_end"]; ok && pce < o.sections["_stext"] {
				k, ok := chain.Finder(kdumpsyms.FinderKallsyms)
				require.True(t, ok)
				n := 0
				for _, f := range []symfinder.Finder{k, file} {
					_ = f.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
						if sym.Module == "" && sym.Addr <= pce {
							n++
							assert.LessOrEqual(t, sym.Addr+sym.Size, pce, "%s", sym)
						}
						return true
					})
				}
				assert.Greater(t, n, 100)
			}
			assert.Greater(t, found, 3000)
			// (deb14-7.2-riscv64, with three modules, probes the fewest
			// module gaps: about 500 addresses in none.)
			assert.Greater(t, missing, 400)
		})
	}
}

// chainOf returns a chain of a shared session's finders in the order
// named, leaving the session's own chain as it is.
func chainOf(t *testing.T, s *kdumpsyms.Session, names ...string) *symfinder.Chain {
	t.Helper()
	var fs []symfinder.Finder
	for _, n := range names {
		f, ok := s.Chain().Finder(n)
		if !ok {
			t.Fatalf("the session has no finder %q", n)
		}
		fs = append(fs, f)
	}
	c, err := symfinder.NewChain(fs...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bestHit returns the first symbol a finder gives for an address (ByAddr
// yields the best first), without collecting the rest.
func bestHit(f symfinder.Finder, a uint64) (symfinder.Symbol, bool) {
	var hit symfinder.Symbol
	ok := false
	_ = f.Find(symfinder.Query{Kind: symfinder.ByAddr, Addr: a}, func(s symfinder.Symbol) bool { hit, ok = s, true; return false })
	return hit, ok
}

// checkRegionsAgainstProcModules ties the regions read from the dump to
// the ground truth: each module's text base and total size are what
// /proc/modules printed.
func checkRegionsAgainstProcModules(t *testing.T, g *testutil.CorpusGuest, set *modsyms.Set) {
	for _, pm := range g.Modules(t) {
		m, ok := set.Module(pm.Name)
		require.True(t, ok, pm.Name)
		assert.Equal(t, pm.Addr, m.TextBase, pm.Name)
		assert.Equal(t, pm.Size, m.Size, pm.Name)
	}
}
