package testutil

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKallsyms(t *testing.T) {
	in := "ffffffff81000000 T _text\n" +
		"ffffffffc0a01000 t xfs_foo\t[xfs]\n" +
		"ffffffffc02e7668 t bpf_prog_57cd311f2e27366b_kds_alpha\t[bpf]\n" +
		"ffffffffc0558000 t kprobe_insn_page\t[__builtin__kprobes]\n" +
		"0000000000000000 A fixed_percpu_data\n"
	e, err := ParseKallsyms(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, e, 5)
	assert.Equal(t, KallsymsEntry{Addr: 0xffffffff81000000, Type: 'T', Name: "_text", Kind: SymVmlinux}, e[0])
	assert.Equal(t, KallsymsEntry{Addr: 0xffffffffc0a01000, Type: 't', Name: "xfs_foo", Module: "xfs", Kind: SymModule}, e[1])
	assert.Equal(t, SymBPF, e[2].Kind)
	assert.Equal(t, "__builtin__kprobes", e[3].Module)
	assert.Equal(t, SymPseudo, e[3].Kind)
	assert.Equal(t, uint64(0), e[4].Addr)

	for _, bad := range []string{"xyz T a\n", "ffff T\n", "ffff T a\t[x\n", "ffff TT a\n"} {
		_, err := ParseKallsyms(strings.NewReader(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseProcModules(t *testing.T) {
	in := "ext4 991232 0 - Live 0xffffffffc09b3000\n" +
		"crc16 16384 1 ext4, Live 0xffffffffc099f000\n" +
		"libcrc32c 12288 2 btrfs,xfs, Live 0xffffffffc0400000 (E)\n"
	m, err := ParseProcModules(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, m, 3)
	assert.Equal(t, ProcModule{Name: "ext4", Size: 991232, Refcount: 0, State: "Live", Addr: 0xffffffffc09b3000}, m[0])
	assert.Equal(t, []string{"ext4"}, m[1].Deps)
	assert.Equal(t, []string{"btrfs", "xfs"}, m[2].Deps)
	assert.Equal(t, "E", m[2].Taints)

	_, err = ParseProcModules(strings.NewReader("ext4 x 0 - Live 0x0\n"))
	assert.Error(t, err)
}

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	assert.Equal(t, RootModule, modulePath(b))
	// The nested corpus module must not be mistaken for the root.
	b, err = os.ReadFile(filepath.Join(CorpusDir(t), "go.mod"))
	require.NoError(t, err)
	assert.Equal(t, RootModule+"/testdata/vmcores", modulePath(b))
}

// TestCorpusGroundTruth checks the committed ground truth against itself
// and against manifest.json. It needs no dumps. With -short it checks the
// one guest -short runs, as the tests that read it do.
func TestCorpusGroundTruth(t *testing.T) {
	for _, g := range Corpus(t) {
		t.Run(g.Name, func(t *testing.T) {
			mt := g.Manifest.Truth
			entries := g.Kallsyms(t)
			var got ManifestTruth
			got.KallsymsLines = len(entries)
			got.OtherByName = map[string]int{}
			modSyms := map[string]int{}
			for _, e := range entries {
				switch e.Kind {
				case SymVmlinux:
					got.Vmlinux++
				case SymModule:
					got.Modules++
					modSyms[e.Module]++
				case SymBPF:
					got.BPF++
				case SymPseudo:
					got.Other++
					got.OtherByName[e.Module]++
				}
			}
			mods := g.Modules(t)
			got.ProcModules = len(mods)
			count := func(b []byte, ok bool) int {
				if s := strings.TrimSpace(string(b)); ok && s != "" {
					return strings.Count(s, "\n") + 1
				}
				return 0
			}
			got.DmesgLines = count(g.Dmesg(t))
			got.ConsoleLines = count(g.ConsoleLog(t))
			if g.Manifest.BTF != nil { // generated since dmesg and the console are kept
				assert.Positive(t, got.DmesgLines, "no dmesg")
				console, _ := g.ConsoleLog(t)
				assert.Contains(t, string(console), "Kernel panic - not syncing", "console.log has no panic")
			}
			if len(mt.OtherByName) == 0 {
				mt.OtherByName = map[string]int{}
			}
			assert.Equal(t, mt, got, "ground-truth counts differ from manifest.json")
			assert.Positive(t, got.Vmlinux)
			assert.Positive(t, got.Modules)

			// KASLR is on (but on s390x: TCG has no PRNG; ppc64 has no
			// KASLR on pseries; Debian's riscv64 kernel is built without
			// RANDOMIZE_BASE), so kallsyms
			// addresses are real (kptr_restrict=0) and every loaded module
			// has symbols.
			// _stext, the start of .text, unrandomized: 0xffffffff81000000 on
			// x86_64; KIMAGE_VADDR (0xffff800008000000 before v6.4, then
			// 0xffff800080000000) + 64 KiB of head text on arm64 (whose _text,
			// before _stext, kallsyms lacks without KALLSYMS_ALL);
			// PAGE_OFFSET + CONFIG_PHYSICAL_START on i386; TEXT_OFFSET
			// above KERNELOFFSET on s390x, where KERNELOFFSET is the image's
			// virtual base even without KASLR (v6.10+); PAGE_OFFSET on
			// ppc64, whose image starts at physical 0; on armhf (no KASLR)
			// PAGE_OFFSET + TEXT_OFFSET (0x208000) rounded up by the
			// section-aligned .head.text and vectors to 0xc0400000 (6.12);
			// KERNEL_LINK_ADDR plus two pages of head text (_start, the
			// PE/COFF header) on riscv64.
			stextBase := map[string][]uint64{"amd64": {0xffffffff81000000}, "arm64": {0xffff800008010000, 0xffff800080010000},
				"i386": {0xc1000000}, "s390x": {0x100000}, "ppc64el": {0xc000000000000000}, "armhf": {0xc0400000},
				"riscv64": {0xffffffff80002000}}[g.Arch()]
			require.NotEmpty(t, stextBase, "arch %q", g.Arch())
			kaslr := g.KASLR()
			text := -1
			for i, e := range entries {
				if e.Name == "_stext" && e.Kind == SymVmlinux {
					text = i
				}
			}
			require.GreaterOrEqual(t, text, 0, "no _stext")
			assert.NotZero(t, entries[text].Addr, "addresses hidden (kptr_restrict?)")
			if kaslr {
				assert.NotContains(t, stextBase, entries[text].Addr, "KASLR should be active")
			} else if g.Arch() == "riscv64" {
				assert.Contains(t, stextBase, entries[text].Addr, "_stext at its link address")
			}
			for _, m := range mods {
				assert.Positive(t, modSyms[m.Name], "no kallsyms lines for module %s", m.Name)
				assert.Equal(t, "Live", m.State)
				assert.NotZero(t, m.Addr)
			}
			assert.Len(t, modSyms, len(mods), "kallsyms modules vs /proc/modules")

			uname := g.Uname(t)
			assert.Equal(t, g.Manifest.Uname, uname)
			vi := string(g.VMCOREINFO(t))
			assert.Contains(t, vi, "OSRELEASE="+uname+"\n")
			if g.Arch() == "riscv64" {
				// riscv64's arch_crash_save_vmcoreinfo prints its
				// va_kernel_pa_offset and KERNEL_LINK_ADDR, and from 7.x
				// (deb14-7.2-riscv64, not 6.12) KERNELOFFSET and
				// NUMBER(satp) too; Debian's has no KASLR.
				if strings.Contains(vi, "KERNELOFFSET=") {
					assert.Contains(t, vi, "\nKERNELOFFSET=0\n")
				}
			} else if g.Arch() == "i386" || g.Arch() == "armhf" {
				// 32-bit x86 prints no KERNELOFFSET (KASLR moves the image
				// physically and virtually alike); 32-bit ARM has no KASLR.
				assert.NotContains(t, vi, "KERNELOFFSET=")
			} else {
				assert.Contains(t, vi, "KERNELOFFSET=")
				if kaslr {
					assert.NotContains(t, vi, "KERNELOFFSET=0\n", "KASLR should be active")
				}
			}
			// The ground truth comes from the same boot as the dump: _stext is
			// the unrandomized address plus the note's KERNELOFFSET.
			for line := range strings.SplitSeq(vi, "\n") {
				if v, ok := strings.CutPrefix(line, "KERNELOFFSET="); ok {
					off, err := strconv.ParseUint(v, 16, 64)
					require.NoError(t, err)
					assert.Contains(t, stextBase, entries[text].Addr-off, "_stext vs KERNELOFFSET")
				}
			}
			addr, size := g.VMCOREINFOSys(t)
			assert.NotZero(t, addr)
			assert.GreaterOrEqual(t, size, uint64(len(vi)))
		})
	}
}

// TestCorpusCachedDumps checks cached dumps, when present, against the
// manifest and SHA256SUMS: sizes always, hashes with KDUMP_SYMS_VERIFY_CACHE=1.
func TestCorpusCachedDumps(t *testing.T) {
	sums := ReadSHA256SUMS(t)
	verify := os.Getenv(VerifyCacheEnv) == "1"
	listed := map[string]bool{}
	present := 0
	for _, g := range allGuests(t) {
		names := map[string]bool{}
		for _, f := range g.Manifest.Files {
			key := g.Name + "/" + f.Name
			listed[key] = true
			names[f.Name] = true
			assert.Equal(t, f.SHA256, sums[key], "manifest vs SHA256SUMS for %s", key)
			p := filepath.Join(g.CacheDir, f.Name)
			st, err := os.Stat(p)
			if err != nil {
				continue
			}
			present++
			assert.Equal(t, f.Size, st.Size(), "size of %s", p)
			if verify {
				assert.Equal(t, f.SHA256, sha256File(t, p), "sha256 of %s", p)
			}
		}
		// Every kdump file's codec matches its name.
		for _, f := range g.Manifest.Files {
			want := map[string]string{"zlib": "zlib", "lzo": "lzo", "snappy": "snappy", "zstd": "zstd"}
			for key, codec := range want {
				if f.Info.Format == "kdump" && strings.Contains(f.Name, "-"+key) {
					assert.Positive(t, f.Info.Codecs[codec], "%s/%s has no %s pages", g.Name, f.Name, codec)
				}
			}
		}
		// Every guest has the formats every generate run makes: QEMU's
		// only on arm64 (the host's makedumpfile reads x86_64 dumps only).
		always := []DumpFormat{DumpQEMUELF, DumpQEMUKdumpZlib}
		switch {
		case g.IsCapture():
			// A capture has no QEMU dump; makedumpfile refuses some
			// kernels (trixie's arm64), the plain copy is always there.
			always = []DumpFormat{DumpProcVmcore}
			if g.Arch() == "amd64" {
				always = append(always, DumpZlib, DumpFlat, DumpELF)
			}
		case g.Arch() == "amd64":
			always = append(always, DumpQEMUELFFixed, DumpZlib, DumpLZO, DumpZstd, DumpELF, DumpFlat, DumpSplit)
			assert.True(t, g.HasFormat(DumpSnappy) || g.HasFormat(DumpSnappyReencoded), "%s has no snappy dump", g.Name)
		}
		for _, f := range always {
			assert.True(t, g.HasFormat(f), "%s lacks %s", g.Name, f)
		}
		// Every file the manifest lists is known to testutil.AllDumpFormats.
		for _, df := range AllDumpFormats {
			for _, n := range df.Files() {
				if names[n] {
					delete(names, n)
				}
			}
		}
		assert.Empty(t, sortedKeys(names), "manifest files unknown to testutil.AllDumpFormats")
	}
	for key := range sums {
		assert.True(t, listed[key], "SHA256SUMS lists %s, the manifest does not", key)
	}
	if present == 0 {
		t.Skipf("no cached dumps in %s: %s", CorpusCacheDir(t), generateHint)
	}
	if !verify {
		t.Logf("%d cached dumps match their sizes; set %s=1 to hash them", present, VerifyCacheEnv)
	}
}

func TestRequireDumpSkips(t *testing.T) {
	g := &CorpusGuest{Name: "none", CacheDir: filepath.Join(t.TempDir(), "none")} // no manifest: only the cache counts
	_, ok := g.DumpPaths(DumpSplit)
	assert.False(t, ok)
	assert.Empty(t, g.AvailableDumps())
	_, ok = g.OneDump()
	assert.False(t, ok)
	ran := false
	t.Run("skip", func(t *testing.T) {
		defer func() { ran = t.Skipped() }()
		g.RequireDump(t, DumpZlib)
		t.Fatal("RequireDump did not skip")
	})
	assert.True(t, ran)

	// A format the manifest does not list for a guest skips too.
	g = Corpus(t)[0]
	g.Manifest = &ManifestGuest{Name: g.Name}
	assert.False(t, g.HasFormat(DumpZlib))
	assert.Empty(t, g.Formats())
	t.Run("not-made", func(t *testing.T) {
		defer func() { ran = t.Skipped() }()
		g.RequireDump(t, DumpZlib)
		t.Fatal("RequireDump did not skip")
	})
	assert.True(t, ran)
}

// qemuELFLoads reads the program headers of a QEMU dump, ELF64 (i386
// guests' too) or ELF32 (armhf guests'): debug/elf cannot open the s390x
// ones, whose .shstrtab section header QEMU 7.2 writes little-endian in a
// big-endian file.
func qemuELFLoads(t *testing.T, f io.ReaderAt) (binary.ByteOrder, []elf.ProgHeader) {
	hdr := make([]byte, 64)
	_, err := f.ReadAt(hdr, 0)
	require.NoError(t, err)
	require.Equal(t, "\x7fELF", string(hdr[:4]))
	is32 := hdr[4] == byte(elf.ELFCLASS32)
	require.True(t, is32 || hdr[4] == byte(elf.ELFCLASS64), "ELF class %d", hdr[4])
	var bo binary.ByteOrder = binary.LittleEndian
	if hdr[5] == byte(elf.ELFDATA2MSB) {
		bo = binary.BigEndian
	}
	phoff, phnum, phsize := bo.Uint64(hdr[32:]), int(bo.Uint16(hdr[56:])), 56
	if is32 {
		phoff, phnum, phsize = uint64(bo.Uint32(hdr[28:])), int(bo.Uint16(hdr[44:])), 32
	}
	require.Less(t, phnum, 0xffff, "PN_XNUM")
	buf := make([]byte, phsize*phnum)
	_, err = f.ReadAt(buf, int64(phoff))
	require.NoError(t, err)
	var out []elf.ProgHeader
	for i := range phnum {
		b := buf[phsize*i:]
		if is32 {
			w := func(o int) uint64 { return uint64(bo.Uint32(b[o:])) }
			out = append(out, elf.ProgHeader{Type: elf.ProgType(bo.Uint32(b)), Off: w(4), Vaddr: w(8),
				Paddr: w(12), Filesz: w(16), Memsz: w(20)})
			continue
		}
		out = append(out, elf.ProgHeader{Type: elf.ProgType(bo.Uint32(b)), Off: bo.Uint64(b[8:]), Vaddr: bo.Uint64(b[16:]),
			Paddr: bo.Uint64(b[24:]), Filesz: bo.Uint64(b[32:]), Memsz: bo.Uint64(b[40:])})
	}
	return bo, out
}

func sha256File(t *testing.T, p string) string {
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// TestCorpusVMCOREINFOInDump ties the ground truth to the dump: the physical
// address /sys/kernel/vmcoreinfo printed holds, in the QEMU ELF dump, an ELF
// note named VMCOREINFO whose text is the committed vmcoreinfo.
func TestCorpusVMCOREINFOInDump(t *testing.T) {
	for _, g := range allGuests(t) {
		t.Run(g.Name, func(t *testing.T) {
			p := g.RequireFullDump(t, DumpQEMUELF)[0]
			f, err := os.Open(p)
			require.NoError(t, err)
			defer f.Close()
			bo, loads := qemuELFLoads(t, f)
			addr, size := g.VMCOREINFOSys(t)
			buf := make([]byte, size)
			found := false
			for _, ph := range loads {
				if ph.Type == elf.PT_LOAD && addr >= ph.Paddr && addr+size <= ph.Paddr+ph.Filesz {
					_, err := f.ReadAt(buf, int64(ph.Off+addr-ph.Paddr))
					require.NoError(t, err)
					found = true
				}
			}
			require.True(t, found, "no PT_LOAD holds %#x", addr)
			if g.Arch() == "ppc64el" {
				// QEMU 7.2 writes the headers big-endian; the note
				// in memory is the little-endian kernel's.
				bo = binary.LittleEndian
			}
			namesz, descsz := bo.Uint32(buf), bo.Uint32(buf[4:])
			require.Equal(t, uint32(len("VMCOREINFO")+1), namesz)
			assert.Equal(t, "VMCOREINFO\x00", string(buf[12:12+namesz]))
			desc := buf[24 : 24+descsz]
			assert.Equal(t, string(g.VMCOREINFO(t)), string(desc))
		})
	}
}

// TestCorpusExtractsFresh checks that the committed extracts were made from
// the dumps SHA256SUMS lists: a regeneration of the corpus must be followed
// by testdata/vmcores/extract-corpus, or DumpPaths ignores the stale
// extracts and the corpus tests skip on a fresh clone.
func TestCorpusExtractsFresh(t *testing.T) {
	sums := ReadSHA256SUMS(t)
	n := 0
	for _, g := range allGuests(t) {
		src := readSources(filepath.Join(g.Dir, ExtractsDirName, "SOURCES"))
		for name, sum := range src {
			assert.Equal(t, sums[name], sum, "%s: extract made from another dump than SHA256SUMS lists: run testdata/vmcores/extract-corpus", name)
			n++
		}
		for _, f := range AllDumpFormats {
			if files, ok := g.ExtractFiles(f); ok {
				assert.NotEmpty(t, files)
				assert.True(t, g.HasFormat(f), "%s/%s: extract of a format the manifest does not list", g.Name, f)
			}
		}
	}
	assert.NotZero(t, n, "no committed extracts")
}

// TestOneDump: the one dump of a guest is its QEMU ELF dump, which every
// guest has (committed as an extract), or on a kdump capture the copy of
// /proc/vmcore (committed too).
func TestOneDump(t *testing.T) {
	for _, g := range Corpus(t) {
		want := DumpQEMUELF
		if g.IsCapture() {
			want = DumpProcVmcore
		}
		f, ok := g.OneDump()
		require.True(t, ok, g.Name)
		assert.Equal(t, want, f, g.Name)
		assert.Equal(t, want, g.AvailableDumps()[0], g.Name)
		if Thorough() {
			assert.Equal(t, g.AvailableDumps(), g.SampleDumps(), g.Name)
		} else {
			assert.Equal(t, []DumpFormat{want}, g.SampleDumps(), g.Name)
		}
	}
}

// TestOnceMap: one computation per key, its error kept, concurrent first
// callers served the one value, and Drain hands back the values that
// computed.
func TestOnceMap(t *testing.T) {
	var m OnceMap[string, int]
	calls := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, err := m.Get("a", func() (int, error) { calls++; return 7, nil })
			if v != 7 || err != nil {
				t.Errorf("Get: %d, %v", v, err)
			}
		})
	}
	wg.Wait()
	if calls != 1 {
		t.Errorf("%d computations of one key, want 1", calls)
	}
	boom := errors.New("boom")
	for range 2 {
		if _, err := m.Get("b", func() (int, error) { calls++; return 0, boom }); err != boom {
			t.Errorf("Get b: %v, want boom", err)
		}
	}
	if calls != 2 {
		t.Errorf("%d computations, want 2: an error is kept, not retried", calls)
	}
	var drained []int
	m.Drain(func(v int) { drained = append(drained, v) })
	if len(drained) != 1 || drained[0] != 7 {
		t.Errorf("Drain gave %v, want [7]", drained)
	}
	if v, _ := m.Get("a", func() (int, error) { return 8, nil }); v != 8 {
		t.Errorf("after Drain, Get recomputes: %d, want 8", v)
	}
}
