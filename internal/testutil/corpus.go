package testutil

// Access to the real-vmcore corpus under testdata/vmcores (see its README).
// The corpus is its own Go module, so the root module's tests read it by
// path: the committed ground truth (kallsyms.xz, modules, vmcoreinfo, uname)
// is always there; the dumps themselves live in a cache directory made by
// testdata/vmcores/generate and tests skip when they are absent.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RootModule is the module path whose go.mod marks the repository root.
const RootModule = "github.com/kdumpsyms/kdumpsyms"

// CorpusEnv names the environment variable that overrides the dump cache
// directory (default: testdata/vmcores/.cache).
const CorpusEnv = "KDUMP_SYMS_CORPUS"

// VerifyCacheEnv, when set to 1, makes the corpus test hash every cached
// dump against SHA256SUMS (by default only sizes are checked).
const VerifyCacheEnv = "KDUMP_SYMS_VERIFY_CACHE"

// generateHint is the message of every skip caused by a missing dump.
const generateHint = "run testdata/vmcores/generate (needs root, qemu, network to Debian's archive)"

// DumpFormat names one dump of a corpus guest: its file name in the cache
// directory. A split dump names the common prefix of its ".1" and ".2" files.
type DumpFormat string

// The dumps generate writes for every guest.
const (
	DumpQEMUELF       DumpFormat = "qemu.elf"        // QEMU dump-guest-memory, ELF (section headers first, e_ehsize 8)
	DumpQEMUELFFixed  DumpFormat = "qemu-fixed.elf"  // the same with program headers at 64 (what makedumpfile reads)
	DumpQEMUKdumpZlib DumpFormat = "qemu.kdump-zlib" // QEMU dump-guest-memory -z: flattened kdump, zlib, dump_level 1
	// DumpQEMUKdumpRawZlib is QEMU's seekable (not flattened) kdump-raw-zlib;
	// only guests dumped by QEMU 10 (deb13-6.12-amd64) have it.
	DumpQEMUKdumpRawZlib DumpFormat = "qemu.kdump-raw-zlib"
	DumpZlib             DumpFormat = "mdf-d31-zlib.kdump"   // makedumpfile -c -d 31
	DumpLZO              DumpFormat = "mdf-d31-lzo.kdump"    // makedumpfile -l -d 31
	DumpSnappy           DumpFormat = "mdf-d31-snappy.kdump" // makedumpfile -p -d 31 (only with a snappy-enabled makedumpfile)
	DumpRaw              DumpFormat = "mdf-d31-raw.kdump"    // makedumpfile -d 31, uncompressed pages (when no snappy)
	// DumpSnappyReencoded is DumpRaw with its pages re-encoded as makedumpfile
	// -p stores them (raw snappy blocks, flag 0x4), by the corpus tool: no
	// Debian makedumpfile is built with snappy.
	DumpSnappyReencoded DumpFormat = "xform-d31-snappy.kdump"
	DumpZstd            DumpFormat = "mdf-d31-zstd.kdump" // makedumpfile -z -d 31
	DumpELF             DumpFormat = "mdf-d31.elf"        // makedumpfile -E -d 31
	DumpFlat            DumpFormat = "mdf-d31-zlib.flat"  // makedumpfile -F -c -d 31
	DumpSplit           DumpFormat = "mdf-d31-zlib-split" // makedumpfile -c -d 31 --split: files .1 and .2
	// DumpProcVmcore is a plain copy of /proc/vmcore made in the capture
	// kernel of a kdump capture guest (see CorpusGuest.IsCapture): the ELF
	// file the kernel's (or kexec-tools') ELF header describes. On capture
	// guests DumpZlib, DumpFlat and DumpELF are made from /proc/vmcore in
	// the capture kernel too, by the guest's own makedumpfile.
	DumpProcVmcore DumpFormat = "proc-vmcore.elf"
)

// AllDumpFormats lists every DumpFormat, QEMU's first.
var AllDumpFormats = []DumpFormat{
	DumpQEMUELF, DumpProcVmcore, DumpQEMUELFFixed, DumpQEMUKdumpZlib, DumpQEMUKdumpRawZlib, DumpZlib, DumpLZO, DumpSnappy,
	DumpRaw, DumpSnappyReencoded, DumpZstd, DumpELF, DumpFlat, DumpSplit,
}

// Files returns the file names of the format (two for DumpSplit).
func (f DumpFormat) Files() []string {
	if f == DumpSplit {
		return []string{string(f) + ".1", string(f) + ".2"}
	}
	return []string{string(f)}
}

// SymKind classifies a /proc/kallsyms line by its [module] column.
type SymKind uint8

const (
	SymVmlinux SymKind = iota // no [module] column
	SymModule                 // a loadable module, e.g. [xfs]
	SymBPF                    // [bpf]: BPF JIT images, trampolines, dispatchers
	SymPseudo                 // other pseudo-modules: [__builtin__kprobes], [__builtin__ftrace], ...
)

func (k SymKind) String() string {
	switch k {
	case SymVmlinux:
		return "vmlinux"
	case SymModule:
		return "module"
	case SymBPF:
		return "bpf"
	case SymPseudo:
		return "pseudo"
	}
	return "SymKind(" + strconv.Itoa(int(k)) + ")"
}

// KallsymsEntry is one /proc/kallsyms line.
type KallsymsEntry struct {
	Addr   uint64
	Type   byte   // 'T', 't', 'D', ...
	Name   string // symbol name
	Module string // "" for vmlinux, else the bracketed name without brackets
	Kind   SymKind
}

// ParseKallsyms parses /proc/kallsyms text ("addr type name[\t[module]]").
func ParseKallsyms(r io.Reader) ([]KallsymsEntry, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return parseKallsymsText(string(b))
}

// parseKallsymsText is ParseKallsyms of text. The entries' names and
// modules are substrings of it, not a string per line (a riscv64 guest
// has 1.3 million lines).
func parseKallsymsText(text string) ([]KallsymsEntry, error) {
	out := make([]KallsymsEntry, 0, strings.Count(text, "\n")+1)
	for n := 1; text != ""; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		full := line
		var mod string
		if i := strings.IndexByte(line, '\t'); i >= 0 {
			mod = line[i+1:]
			line = line[:i]
			if len(mod) < 3 || mod[0] != '[' || mod[len(mod)-1] != ']' {
				return nil, fmt.Errorf("kallsyms line %d: bad module column %q", n, mod)
			}
			mod = mod[1 : len(mod)-1]
		}
		// The name is the rest of the line, verbatim: riscv64 modules'
		// ".L0 " labels end in a space.
		a, rest, ok1 := strings.Cut(line, " ")
		typ, name, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || len(typ) != 1 || name == "" || mod == "" && strings.Contains(name, " ") {
			return nil, fmt.Errorf("kallsyms line %d: %q", n, full)
		}
		addr, err := strconv.ParseUint(a, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: address: %w", n, err)
		}
		e := KallsymsEntry{Addr: addr, Type: typ[0], Name: name, Module: mod, Kind: ClassifyModule(mod)}
		out = append(out, e)
	}
	return out, nil
}

// ClassifyModule returns the kind of a /proc/kallsyms module column (without
// brackets): "" is vmlinux, "bpf" is BPF, "__builtin__*" are pseudo-modules.
func ClassifyModule(mod string) SymKind {
	switch {
	case mod == "":
		return SymVmlinux
	case mod == "bpf":
		return SymBPF
	case strings.HasPrefix(mod, "__builtin__"):
		return SymPseudo
	}
	return SymModule
}

// ProcModule is one /proc/modules line.
type ProcModule struct {
	Name     string
	Size     uint64
	Refcount int      // -1 when the kernel printed "-"
	Deps     []string // modules using this one ("used by"), nil for "-"
	State    string   // Live, Loading, Unloading
	Addr     uint64
	Taints   string // e.g. "OE" from "(OE)", "" if none
}

// ParseProcModules parses /proc/modules text.
func ParseProcModules(r io.Reader) ([]ProcModule, error) {
	var out []ProcModule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 6 && len(f) != 7 {
			return nil, fmt.Errorf("modules line %d: %q", n, sc.Text())
		}
		m := ProcModule{Name: f[0], State: f[4], Refcount: -1}
		var err error
		if m.Size, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return nil, fmt.Errorf("modules line %d: size: %w", n, err)
		}
		if f[2] != "-" {
			if m.Refcount, err = strconv.Atoi(f[2]); err != nil {
				return nil, fmt.Errorf("modules line %d: refcount: %w", n, err)
			}
		}
		if f[3] != "-" {
			for d := range strings.SplitSeq(strings.TrimSuffix(f[3], ","), ",") {
				m.Deps = append(m.Deps, d)
			}
		}
		if m.Addr, err = strconv.ParseUint(strings.TrimPrefix(f[5], "0x"), 16, 64); err != nil {
			return nil, fmt.Errorf("modules line %d: address: %w", n, err)
		}
		if len(f) == 7 {
			m.Taints = strings.Trim(f[6], "()")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// RepoRoot returns the repository root: the nearest directory, walking up
// from the working directory, whose go.mod declares RootModule.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(b) == RootModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testutil: no go.mod of " + RootModule + " above the working directory")
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// CorpusDir returns testdata/vmcores of the repository.
func CorpusDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(RepoRoot(tb), "testdata", "vmcores")
}

// CorpusCacheDir returns where generate puts the dumps: $KDUMP_SYMS_CORPUS
// if set, else testdata/vmcores/.cache. It may not exist.
func CorpusCacheDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv(CorpusEnv); d != "" {
		return d
	}
	return filepath.Join(CorpusDir(tb), ".cache")
}

// CorpusGuest is one guest of the corpus: committed ground truth in Dir,
// dumps (maybe absent) in CacheDir.
type CorpusGuest struct {
	Name     string         // e.g. "deb12-6.1-amd64"
	Dir      string         // testdata/vmcores/<name>
	CacheDir string         // <cache>/<name>
	Manifest *ManifestGuest // its entry in manifest.json
}

// ShortGuest is the one guest corpus tests run on with go test -short: the
// largest kernel, with BTF, KALLSYMS_ALL and the kallsyms VMCOREINFO lines.
const ShortGuest = "deb13-6.12-amd64"

// Corpus returns every guest listed in testdata/vmcores/manifest.json, in
// manifest order; with go test -short, only ShortGuest (see also
// CorpusGuest.AvailableDumps). It fails the test if the manifest is
// missing or broken.
func Corpus(tb testing.TB) []*CorpusGuest {
	tb.Helper()
	all := allGuests(tb)
	if testing.Short() {
		for _, g := range all {
			if g.Name == ShortGuest {
				return []*CorpusGuest{g}
			}
		}
		return all[:1]
	}
	return all
}

func allGuests(tb testing.TB) []*CorpusGuest {
	tb.Helper()
	m := CorpusManifest(tb)
	cache := CorpusCacheDir(tb)
	dir := CorpusDir(tb)
	var out []*CorpusGuest
	for _, g := range m.Guests {
		out = append(out, &CorpusGuest{Name: g.Name, Dir: filepath.Join(dir, g.Name), CacheDir: filepath.Join(cache, g.Name), Manifest: g})
	}
	if len(out) == 0 {
		tb.Fatal("testutil: manifest.json lists no guests")
	}
	return out
}

// CorpusGuestNamed returns the guest called name, failing the test if absent.
func CorpusGuestNamed(tb testing.TB, name string) *CorpusGuest {
	tb.Helper()
	for _, g := range allGuests(tb) {
		if g.Name == name {
			return g
		}
	}
	tb.Fatalf("testutil: no corpus guest %q", name)
	return nil
}

// Manifest mirrors testdata/vmcores/manifest.json (written by generate).
type Manifest struct {
	Guests []*ManifestGuest `json:"guests"`
}

// ManifestGuest is one guest in the manifest.
type ManifestGuest struct {
	Name string `json:"name"`
	Arch string `json:"arch"` // amd64, arm64, armhf, i386, s390x, ppc64el or riscv64 (the name's last part)
	// KallsymsAll is the kernel's CONFIG_KALLSYMS_ALL (see CorpusGuest.ExpectModules).
	KallsymsAll bool `json:"kallsyms_all"`
	// BTF (CONFIG_DEBUG_INFO_BTF), BPFJIT (CONFIG_BPF_JIT) and
	// VMCOREINFONote (QEMU's ELF dump carries the note) are nil for guests
	// generated before they were recorded (all amd64 and arm64 guests have
	// BTF and a BPF JIT, and their dumps the note).
	BTF                  *bool    `json:"btf"`
	BPFJIT               *bool    `json:"bpf_jit"`
	VMCOREINFONote       *bool    `json:"vmcoreinfo_note"`
	KernelPackage        string   `json:"kernel_package"`
	KernelVersion        string   `json:"kernel_version"`
	Uname                string   `json:"uname"`
	KernelCmdline        string   `json:"kernel_cmdline"`
	QEMUVersion          string   `json:"qemu_version"`
	QEMUCommand          string   `json:"qemu_command"`
	QEMUDumpCommands     []string `json:"qemu_dump_commands"`
	MakedumpfileVersion  string   `json:"makedumpfile_version"`
	MakedumpfileCommands []string `json:"makedumpfile_commands"`
	InsmodOrder          []string `json:"insmod_order"`
	// Capture is set for a real kdump capture (IsCapture): the dumps were
	// written in the capture kernel, none by QEMU.
	Capture *ManifestCapture `json:"capture"`
	Truth   ManifestTruth    `json:"ground_truth"`
	Files   []*ManifestFile  `json:"files"`
}

// ManifestCapture is how a capture guest's dumps were made: the guest
// booted with crashkernel=, loaded the capture kernel with kexec -p, and
// crashed (sysrq-c); the capture kernel ran MakedumpfileCommands.
type ManifestCapture struct {
	Crashkernel  string   `json:"crashkernel"`
	KexecVersion string   `json:"kexec_version"`
	KexecCommand string   `json:"kexec_command"` // -s: kexec_file_load, -c: kexec_load
	Status       []string `json:"status"`        // "file exit-status" per capture command
}

// ManifestTruth counts the ground-truth lines.
type ManifestTruth struct {
	KallsymsLines int            `json:"kallsyms_lines"`
	Vmlinux       int            `json:"vmlinux"`
	Modules       int            `json:"modules"`
	BPF           int            `json:"bpf"`
	Other         int            `json:"other"`
	OtherByName   map[string]int `json:"other_by_name"`
	ProcModules   int            `json:"proc_modules"`
	DmesgLines    int            `json:"dmesg_lines"`
	ConsoleLines  int            `json:"console_lines"`
}

// ManifestFile describes one cached dump file.
type ManifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Info   struct {
		Format        string         `json:"format"` // "elf" or "kdump"
		Flattened     bool           `json:"flattened"`
		HeaderVersion int32          `json:"header_version"`
		Status        uint32         `json:"status"`
		DumpLevel     int32          `json:"dump_level"`
		Split         int32          `json:"split"`
		StartPFN      uint64         `json:"start_pfn"`
		EndPFN        uint64         `json:"end_pfn"`
		MaxMapnr      uint64         `json:"max_mapnr"`
		Pages         uint64         `json:"pages"`
		Codecs        map[string]int `json:"codecs"` // page descriptors per codec: raw, zlib, lzo, snappy, zstd
		PTLoads       int            `json:"pt_loads"`
	} `json:"info"`
}

// File returns the manifest entry of the named file, or nil.
func (g *ManifestGuest) File(name string) *ManifestFile {
	for _, f := range g.Files {
		if f.Name == name {
			return f
		}
	}
	return nil
}

var manifestCache struct {
	sync.Mutex
	byPath map[string]*Manifest
}

// CorpusManifest reads and caches testdata/vmcores/manifest.json.
func CorpusManifest(tb testing.TB) *Manifest {
	tb.Helper()
	p := filepath.Join(CorpusDir(tb), "manifest.json")
	manifestCache.Lock()
	defer manifestCache.Unlock()
	if m := manifestCache.byPath[p]; m != nil {
		return m
	}
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatalf("testutil: %v", err)
	}
	m := new(Manifest)
	if err := json.Unmarshal(b, m); err != nil {
		tb.Fatalf("testutil: %s: %v", p, err)
	}
	if manifestCache.byPath == nil {
		manifestCache.byPath = map[string]*Manifest{}
	}
	manifestCache.byPath[p] = m
	return m
}

func (g *CorpusGuest) read(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(g.Dir, name))
	if err != nil {
		tb.Fatalf("testutil: corpus guest %s: %v", g.Name, err)
	}
	return b
}

// Arch returns the guest's architecture as Debian names it: "amd64",
// "arm64", "armhf", "i386", "s390x", "ppc64el" or "riscv64".
func (g *CorpusGuest) Arch() string { return g.Manifest.Arch }

// ArchName returns the architecture as vmcore.Arch names it: "x86_64",
// "arm64", "arm", "i386", "s390x", "ppc64le" or "riscv64".
func (g *CorpusGuest) ArchName() string {
	switch g.Arch() {
	case "amd64":
		return "x86_64"
	case "ppc64el":
		return "ppc64le"
	case "armhf":
		return "arm"
	}
	return g.Arch()
}

// IsCapture reports whether the guest is a real kdump capture: its dumps
// were saved from /proc/vmcore by the capture kernel that the crashed
// kernel kexec'ed into, as a distribution's kdump does, not written by
// QEMU. The crashing CPU's registers are then those crash_setup_regs()
// saved in __crash_kexec, and makedumpfile's -d 31 left out free, cache
// and user pages.
func (g *CorpusGuest) IsCapture() bool { return g.Manifest != nil && g.Manifest.Capture != nil }

// PtrSize returns the guest kernel's pointer size: 4 on i386 and armhf.
func (g *CorpusGuest) PtrSize() int {
	if g.Arch() == "i386" || g.Arch() == "armhf" {
		return 4
	}
	return 8
}

// KASLR reports whether the guest's kernel randomizes its placement: not
// on s390x (TCG has no PRNG), armhf (32-bit ARM has no KASLR) nor ppc64el
// (none of the corpus' pseries boots had it) nor riscv64 (Debian builds it
// without RANDOMIZE_BASE).
func (g *CorpusGuest) KASLR() bool {
	return g.Arch() != "s390x" && g.Arch() != "armhf" && g.Arch() != "ppc64el" && g.Arch() != "riscv64"
}

// ExpectModules reports whether kallsyms holds the data symbols the
// symbol-based paths start from: the `modules` list head, `__start_BTF`
// (before v6.10), the ftrace, BPF and kprobes list heads. It does not when
// the kernel lacks CONFIG_KALLSYMS_ALL (Debian's arm64 6.1, i386 5.10);
// the session then finds the modules by scanning and the other list heads
// through the code that uses them, and still prints the whole
// /proc/kallsyms.
func (g *CorpusGuest) ExpectModules() bool { return g.Manifest.KallsymsAll }

// MissingSymbol is the symbol the symbol-based paths (the modules list
// head and BTF by __start_BTF, which ExpectModules guards) name when the
// kernel lacks KALLSYMS_ALL.
const MissingSymbol = "__start_BTF"

// KallsymsText returns the guest's /proc/kallsyms captured just before the
// crash, decompressed from kallsyms.xz once per machine (into the cache
// the extracts use) and read once per test process: tests ask for it
// often. The bytes are shared by every caller and must not be modified.
func (g *CorpusGuest) KallsymsText(tb testing.TB) []byte {
	tb.Helper()
	k := g.kallsymsMemo()
	k.textOnce.Do(func() { k.text, k.textErr = readKallsymsText(k.xz) })
	if k.textErr != nil {
		tb.Fatalf("testutil: %s/kallsyms.xz: %v", g.Name, k.textErr)
	}
	return k.text
}

func readKallsymsText(xzPath string) ([]byte, error) {
	plain, err := decompressedExtract(xzPath)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(plain)
}

// kallsymsMemo is what one test process has read and parsed of one
// guest's kallsyms.xz: immutable once made, so shared by every test (and
// by parallel ones) rather than parsed again by each (a riscv64 guest has
// 1.3 million lines).
type kallsymsMemo struct {
	xz         string
	textOnce   sync.Once
	text       []byte
	textErr    error
	parsedOnce sync.Once
	parsed     []KallsymsEntry
	parsedErr  error
}

var kallsymsMemos struct {
	sync.Mutex
	byPath map[string]*kallsymsMemo
}

func (g *CorpusGuest) kallsymsMemo() *kallsymsMemo {
	p := filepath.Join(g.Dir, "kallsyms.xz")
	kallsymsMemos.Lock()
	defer kallsymsMemos.Unlock()
	k := kallsymsMemos.byPath[p]
	if k == nil {
		if kallsymsMemos.byPath == nil {
			kallsymsMemos.byPath = map[string]*kallsymsMemo{}
		}
		k = &kallsymsMemo{xz: p}
		kallsymsMemos.byPath[p] = k
	}
	return k
}

// VmlinuxKallsymsText returns the lines of KallsymsText without a [module]
// column: what the kallsyms tables alone give.
func (g *CorpusGuest) VmlinuxKallsymsText(tb testing.TB) []byte {
	tb.Helper()
	var out []byte
	for line := range bytes.Lines(g.KallsymsText(tb)) {
		if bytes.IndexByte(line, '\t') < 0 {
			out = append(out, line...)
		}
	}
	return out
}

// Kallsyms returns the guest's /proc/kallsyms, parsed, in file order. It
// is parsed once per test process and the slice is shared by every
// caller: read it, never modify it (slices.Clone it first to sort or
// edit).
func (g *CorpusGuest) Kallsyms(tb testing.TB) []KallsymsEntry {
	tb.Helper()
	text := g.KallsymsText(tb)
	k := g.kallsymsMemo()
	k.parsedOnce.Do(func() { k.parsed, k.parsedErr = parseKallsymsText(string(text)) })
	if k.parsedErr != nil {
		tb.Fatalf("testutil: %s/kallsyms.xz: %v", g.Name, k.parsedErr)
	}
	return k.parsed
}

// Modules returns the guest's /proc/modules, parsed, in file order
// (most recently loaded first).
func (g *CorpusGuest) Modules(tb testing.TB) []ProcModule {
	tb.Helper()
	m, err := ParseProcModules(bytes.NewReader(g.read(tb, "modules")))
	if err != nil {
		tb.Fatalf("testutil: %s/modules: %v", g.Name, err)
	}
	return m
}

// Uname returns `uname -r` of the guest.
func (g *CorpusGuest) Uname(tb testing.TB) string {
	tb.Helper()
	return strings.TrimSpace(string(g.read(tb, "uname")))
}

// VMCOREINFO returns the VMCOREINFO note text, as found in the QEMU ELF dump.
func (g *CorpusGuest) VMCOREINFO(tb testing.TB) []byte {
	tb.Helper()
	return g.read(tb, "vmcoreinfo")
}

// VMCOREINFOSys returns what /sys/kernel/vmcoreinfo printed: the physical
// address and size (both printed in hex) of the guest's VMCOREINFO ELF note.
func (g *CorpusGuest) VMCOREINFOSys(tb testing.TB) (addr, size uint64) {
	tb.Helper()
	f := strings.Fields(string(g.read(tb, "vmcoreinfo.sys")))
	if len(f) != 2 {
		tb.Fatalf("testutil: %s/vmcoreinfo.sys: %q", g.Name, f)
	}
	var err1, err2 error
	addr, err1 = strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
	size, err2 = strconv.ParseUint(f[1], 16, 64)
	if err := errors.Join(err1, err2); err != nil {
		tb.Fatalf("testutil: %s/vmcoreinfo.sys: %v", g.Name, err)
	}
	return addr, size
}

// DumpPaths returns the paths of a dump format (two for DumpSplit) and
// whether all of them exist: the full dumps of the cache when they are
// there, else the committed extracts, decompressed (see IsExtract and
// ExtractPaths).
func (g *CorpusGuest) DumpPaths(f DumpFormat) ([]string, bool) {
	full, ok := g.FullDumpPaths(f)
	if ok {
		return full, true
	}
	if p, ok := g.ExtractPaths(f); ok {
		return p, true
	}
	return full, false
}

// HasFormat reports whether the manifest lists the format for this guest,
// i.e. whether generate produces it (whether or not it is in the cache).
func (g *CorpusGuest) HasFormat(f DumpFormat) bool {
	if g.Manifest == nil {
		return false
	}
	for _, n := range f.Files() {
		if g.Manifest.File(n) == nil {
			return false
		}
	}
	return true
}

// Formats returns the formats the manifest lists for this guest.
func (g *CorpusGuest) Formats() []DumpFormat {
	var out []DumpFormat
	for _, f := range AllDumpFormats {
		if g.HasFormat(f) {
			out = append(out, f)
		}
	}
	return out
}

// RequireDump returns the cache paths of a dump format, skipping the test
// when the guest has no such format, or with a hint to run generate when
// the files are not in the cache.
func (g *CorpusGuest) RequireDump(tb testing.TB, f DumpFormat) []string {
	tb.Helper()
	if g.Manifest != nil && !g.HasFormat(f) {
		tb.Skipf("corpus guest %s has no %s dump (not made for this guest)", g.Name, f)
	}
	p, ok := g.DumpPaths(f)
	if !ok {
		tb.Skipf("corpus dump %s/%s not in %s: %s", g.Name, f, filepath.Dir(g.CacheDir), generateHint)
	}
	return p
}

// AvailableDumps returns the formats DumpPaths has: full dumps in the
// cache, or committed extracts; with go test -short, only the first.
func (g *CorpusGuest) AvailableDumps() []DumpFormat {
	var out []DumpFormat
	for _, f := range AllDumpFormats {
		if _, ok := g.DumpPaths(f); ok {
			out = append(out, f)
			if testing.Short() {
				break
			}
		}
	}
	return out
}

// OneDump returns the format a test uses when it needs a dump of the
// guest rather than every format: the first of AvailableDumps, which is
// the QEMU ELF dump whenever there is one (its pages are read in place,
// none decompressed). It is false when the guest has no dump here.
func (g *CorpusGuest) OneDump() (DumpFormat, bool) {
	for _, f := range AllDumpFormats {
		if _, ok := g.DumpPaths(f); ok {
			return f, true
		}
	}
	return "", false
}

// RequireOneDump returns the paths of the guest's first dump in
// AllDumpFormats order (the full one when cached, else its extract), and
// skips the test when it has none.
func (g *CorpusGuest) RequireOneDump(tb testing.TB) []string {
	tb.Helper()
	f, ok := g.OneDump()
	if !ok {
		tb.Skipf("no dump of %s", g.Name)
	}
	paths, _ := g.DumpPaths(f)
	return paths
}

// ReadSHA256SUMS parses testdata/vmcores/SHA256SUMS into "guest/file" → hex digest.
func ReadSHA256SUMS(tb testing.TB) map[string]string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(CorpusDir(tb), "SHA256SUMS"))
	if err != nil {
		tb.Fatalf("testutil: %v", err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			tb.Fatalf("testutil: SHA256SUMS: bad line %q", line)
		}
		out[name] = sum
	}
	return out
}

// sortedKeys is used by tests for stable output.
func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
