package main

import (
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

func TestExportUsage(t *testing.T) {
	for _, args := range [][]string{
		{"export"},
		{"export", "vmcore"},
		{"export", "--format", "pdb", "-o", "x", "vmcore"},
		{"export", "--format", "isf", "vmcore"},
	} {
		code, _, _ := runCLI(args...)
		assert.Equal(t, exitUsage, code, args)
	}
}

// elfBindType is what a kallsyms letter becomes in the files: upper case
// global (W and V weak), lower case local; t and T functions, W functions
// in code, a and A no type, the rest objects.
//
// inData says the symbol lies in the core kernel's [__start_rodata,
// __end_rodata] or [_sdata, _edata]: a text letter there is data (7.x
// letters .data symbols t and T).
func elfBindType(k byte, inCode, inData bool) (elf.SymBind, elf.SymType) {
	bind := elf.STB_LOCAL
	switch {
	case k == 'W' || k == 'V':
		bind = elf.STB_WEAK
	case k >= 'A' && k <= 'Z':
		bind = elf.STB_GLOBAL
	}
	typ := elf.STT_OBJECT
	switch {
	case (k == 't' || k == 'T') && !inData || ((k == 'w' || k == 'W') && inCode):
		typ = elf.STT_FUNC
	case k == 'a' || k == 'A':
		typ = elf.STT_NOTYPE
	}
	return bind, typ
}

// TestExportCorpus: `kdump-syms export --format elf` writes vmlinux.syms
// and one MODULE.ko.syms per module, which debug/elf reads back holding
// every line of the guest's /proc/kallsyms (vmlinux and modules): same
// name, address, binding and type as the letter says, in a section holding
// the address (or absolute for a and A), with a size; and which gdb reads.
//
// What the files depend on is their class: run on x86_64 (ELF64) and
// i386 (ELF32), and on 7.2 amd64, whose .data symbols have text letters;
// arm64 (its $x and $d mapping symbols) and the rest with
// testutil.Thorough.
func TestExportCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("exports a whole kernel and runs gdb and nm on it: not with -short")
	}
	for _, g := range testutil.Sample(t, "deb11-5.10-i386", "deb13-6.12-amd64", "deb14-7.2-amd64") {
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			dump := g.RequireDump(t, testutil.DumpQEMUELF)[0]
			dir := t.TempDir()
			code, stdout, stderr := runCLI("export", "--format", "elf", "-o", dir, dump)
			require.Equal(t, exitOK, code, stderr)
			truth := g.Kallsyms(t)
			bounds := map[string]uint64{}
			for _, e := range truth {
				switch e.Name {
				case "__start_rodata", "__end_rodata", "_sdata", "_edata":
					if _, dup := bounds[e.Name]; !dup && e.Kind == testutil.SymVmlinux {
						bounds[e.Name] = e.Addr
					}
				}
			}
			in := func(a uint64, lo, hi string) bool {
				l, ok1 := bounds[lo]
				h, ok2 := bounds[hi]
				return ok1 && ok2 && a >= l && a <= h
			}
			byFile := map[string][]testutil.KallsymsEntry{}
			for _, e := range truth {
				switch e.Kind {
				case testutil.SymVmlinux:
					byFile["vmlinux.syms"] = append(byFile["vmlinux.syms"], e)
				case testutil.SymModule:
					byFile[e.Module+".ko.syms"] = append(byFile[e.Module+".ko.syms"], e)
				}
			}
			assert.Equal(t, len(byFile), strings.Count(stdout, "\n"), "one file per module and vmlinux:\n%s", stdout)
			class := elf.ELFCLASS64
			if g.PtrSize() == 4 {
				class = elf.ELFCLASS32
			}
			for file, want := range byFile {
				f, err := elf.Open(filepath.Join(dir, file))
				require.NoError(t, err, file)
				assert.Equal(t, class, f.Class, file)
				syms, err := f.Symbols()
				require.NoError(t, err, file)
				require.Len(t, syms, len(want), file)
				type key struct {
					name string
					addr uint64
				}
				got := map[key][]elf.Symbol{}
				for _, s := range syms {
					got[key{s.Name, s.Value}] = append(got[key{s.Name, s.Value}], s)
				}
				bad := 0
				for _, e := range want {
					ss := got[key{e.Name, e.Addr}]
					if len(ss) == 0 {
						t.Errorf("%s: %s at %#x missing", file, e.Name, e.Addr)
						bad++
						continue
					}
					s := ss[0]
					got[key{e.Name, e.Addr}] = ss[1:]
					inCode := false
					if s.Section != elf.SHN_ABS {
						if int(s.Section) >= len(f.Sections) {
							t.Fatalf("%s: %s: section %d", file, e.Name, s.Section)
						}
						sec := f.Sections[s.Section]
						inCode = sec.Flags&elf.SHF_EXECINSTR != 0
						if s.Value < sec.Addr || s.Value-sec.Addr >= sec.Size {
							t.Errorf("%s: %s at %#x outside its section %s", file, e.Name, e.Addr, sec.Name)
							bad++
						}
					} else if e.Type != 'a' && e.Type != 'A' && e.Kind == testutil.SymVmlinux {
						t.Errorf("%s: %s (%c) absolute", file, e.Name, e.Type)
						bad++
					}
					inData := e.Kind == testutil.SymVmlinux && (in(e.Addr, "__start_rodata", "__end_rodata") || in(e.Addr, "_sdata", "_edata"))
					wb, wt := elfBindType(e.Type, inCode, inData)
					if elf.ST_BIND(s.Info) != wb || elf.ST_TYPE(s.Info) != wt {
						t.Errorf("%s: %s (%c): %v %v, want %v %v", file, e.Name, e.Type, elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info), wb, wt)
						bad++
					}
					if bad > 10 {
						t.FailNow()
					}
				}
				f.Close()
			}
			checkGDB(t, dir, truth)
			checkNM(t, filepath.Join(dir, "vmlinux.syms"), byFile["vmlinux.syms"])
		})
	}
}

// checkGDB asks gdb's `info symbol` about a few addresses: a function's
// start and an offset into it, a data symbol, a module function (after
// add-symbol-file of the module's file with no address: the file's own
// section addresses), each at an address only one symbol of the ground
// truth has.
func checkGDB(t *testing.T, dir string, truth []testutil.KallsymsEntry) {
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Log("gdb not installed (apt install gdb): the files are not checked with gdb")
		return
	}
	count := map[uint64]int{}
	for _, e := range truth {
		count[e.Addr]++
	}
	pick := func(kind testutil.SymKind, letters string) (testutil.KallsymsEntry, uint64, bool) {
		for i, e := range truth {
			// gdb does not answer with arm64's mapping symbols ($x, $d)
			// nor with local labels (riscv64's ".L0 ").
			if e.Kind != kind || !strings.ContainsRune(letters, rune(e.Type)) || count[e.Addr] != 1 || i+1 >= len(truth) || strings.HasPrefix(e.Name, "$") || strings.HasPrefix(e.Name, ".L") {
				continue
			}
			next := truth[i+1]
			if next.Kind != kind || next.Module != e.Module || next.Addr <= e.Addr+0x10 || count[next.Addr] != 1 {
				continue
			}
			return e, 0x10, true
		}
		return testutil.KallsymsEntry{}, 0, false
	}
	type probe struct {
		e   testutil.KallsymsEntry
		off uint64
	}
	var probes []probe
	for _, k := range []struct {
		kind    testutil.SymKind
		letters string
	}{{testutil.SymVmlinux, "T"}, {testutil.SymVmlinux, "t"}, {testutil.SymVmlinux, "D"}, {testutil.SymModule, "t"}, {testutil.SymModule, "T"}} {
		if e, off, ok := pick(k.kind, k.letters); ok {
			probes = append(probes, probe{e, 0}, probe{e, off})
		}
	}
	require.NotEmpty(t, probes)
	args := []string{"-batch", "-nx", "-ex", "set pagination off"}
	loaded := map[string]bool{}
	for _, p := range probes {
		if p.e.Module != "" && !loaded[p.e.Module] {
			args = append(args, "-ex", fmt.Sprintf("add-symbol-file %s", filepath.Join(dir, p.e.Module+".ko.syms")))
			loaded[p.e.Module] = true
		}
	}
	for _, p := range probes {
		args = append(args, "-ex", fmt.Sprintf("info symbol %#x", p.e.Addr+p.off))
	}
	args = append(args, filepath.Join(dir, "vmlinux.syms"))
	out, err := exec.Command(gdb, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var answers []string
	re := regexp.MustCompile(`^(\S+)( \+ (\d+))? in section (\S+)`)
	for line := range strings.Lines(string(out)) {
		if re.MatchString(line) || strings.HasPrefix(line, "No symbol matches") {
			answers = append(answers, strings.TrimSpace(line))
		}
	}
	require.Len(t, answers, len(probes), "%s", out)
	for i, p := range probes {
		want := p.e.Name
		if p.off != 0 {
			want += fmt.Sprintf(" + %d", p.off)
		}
		want += " in section "
		assert.True(t, strings.HasPrefix(answers[i], want), "gdb info symbol %#x: %q, want %q...", p.e.Addr+p.off, answers[i], want)
		if p.e.Module != "" {
			assert.Contains(t, answers[i], "of "+filepath.Join(dir, p.e.Module+".ko.syms"))
		}
	}
}

// checkNM runs binutils' nm on vmlinux.syms: it lists every symbol, at
// its address, in the case of its kallsyms letter (global or local; the
// letter itself is the section's kind, t for code and b for the rest, as
// the sections hold no data).
func checkNM(t *testing.T, file string, want []testutil.KallsymsEntry) {
	nm, err := exec.LookPath("nm")
	if err != nil {
		t.Log("nm not installed (apt install binutils): the file is not checked with nm")
		return
	}
	out, err := exec.Command(nm, file).Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, len(want))
	upper := map[string]int{} // "addr name" → upper-case letters expected, less those seen
	for _, e := range want {
		k := fmt.Sprintf("%0*x %s", len(strings.Fields(lines[0])[0]), e.Addr, e.Name)
		if bind, _ := elfBindType(e.Type, false, false); bind != elf.STB_LOCAL { // '?' is local
			upper[k]++
		} else {
			upper[k] += 1 << 16
		}
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("nm: %q: want address, letter and name", l)
		}
		k := f[0] + " " + f[2]
		if f[1][0] < 'a' {
			upper[k]--
		} else {
			upper[k] -= 1 << 16
		}
	}
	for k, n := range upper {
		if n != 0 {
			t.Errorf("nm: %s: binding differs from /proc/kallsyms", k)
		}
	}
}
