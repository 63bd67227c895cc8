package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Manifest is testdata/vmcores/manifest.json.
type Manifest struct {
	Comment string   `json:"comment"`
	Guests  []*Guest `json:"guests"`
}

// Guest is one booted kernel, its ground truth and its dumps.
type Guest struct {
	Name string `json:"name"`
	Arch string `json:"arch"` // the guest name's last part: amd64, arm64
	// KallsymsAll is CONFIG_KALLSYMS_ALL of the kernel: without it kallsyms
	// has text symbols only (no modules list head, no __start_BTF before v6.10).
	KallsymsAll bool `json:"kallsyms_all"`
	// BTF is CONFIG_DEBUG_INFO_BTF; VMCOREINFONote whether QEMU's ELF dump
	// carries the VMCOREINFO note (without it the note is only in guest
	// memory). Both absent from entries written before they were recorded.
	BTF            *bool    `json:"btf,omitempty"`
	BPFJIT         *bool    `json:"bpf_jit,omitempty"` // CONFIG_BPF_JIT: without it no [bpf] lines, no bpf_kallsyms
	VMCOREINFONote *bool    `json:"vmcoreinfo_note,omitempty"`
	KernelPackage  string   `json:"kernel_package"`
	KernelVersion  string   `json:"kernel_version"`
	Uname          string   `json:"uname"`
	KernelCmdline  string   `json:"kernel_cmdline"`
	QEMUVersion    string   `json:"qemu_version"`
	QEMUCommand    string   `json:"qemu_command"`
	QEMUDumps      []string `json:"qemu_dump_commands"`
	MakedumpfileV  string   `json:"makedumpfile_version"`
	MakedumpfileCs []string `json:"makedumpfile_commands"`
	LoadedModules  []string `json:"insmod_order"`
	// Capture describes a real kdump capture (no QEMU dumps): nil for the
	// guests dumped by QEMU.
	Capture *Capture `json:"capture,omitempty"`
	Truth   Truth    `json:"ground_truth"`
	Files   []*File  `json:"files"`
}

// Capture is how a kdump capture guest's dumps were made: the capture
// kernel loaded by kexec -p when the guest booted with crashkernel=, which
// after the crash saved /proc/vmcore (MakedumpfileCs of the Guest).
type Capture struct {
	Crashkernel  string   `json:"crashkernel"`   // the crashkernel= of the kernel command line
	KexecVersion string   `json:"kexec_version"` // kexec --version in the guest
	KexecCommand string   `json:"kexec_command"` // as run in the guest (-s kexec_file_load, -c kexec_load)
	Status       []string `json:"status"`        // "file exit-status" of each capture command
}

// Truth counts the lines of the captured /proc/kallsyms and /proc/modules.
type Truth struct {
	KallsymsLines int            `json:"kallsyms_lines"`
	Vmlinux       int            `json:"vmlinux"`
	Modules       int            `json:"modules"` // lines with a real [module]
	BPF           int            `json:"bpf"`
	Other         int            `json:"other"` // [__builtin__*] and other pseudo-modules
	OtherByName   map[string]int `json:"other_by_name,omitempty"`
	ProcModules   int            `json:"proc_modules"`
	DmesgLines    int            `json:"dmesg_lines,omitempty"`   // dmesg in the guest before the crash
	ConsoleLines  int            `json:"console_lines,omitempty"` // the serial console log, panic included
}

// File is one cached dump.
type File struct {
	Name   string    `json:"name"`
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256"`
	Info   *DumpInfo `json:"info"`
}

func manifest(dir, cache string) error {
	m := &Manifest{Comment: "written by testdata/vmcores/generate; files live in $KDUMP_SYMS_CORPUS or testdata/vmcores/.cache/<guest>/"}
	// A guest whose cache directory is absent (a cache holding only some
	// guests) keeps its entry of the previous manifest.
	var old Manifest
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil {
		if err := json.Unmarshal(b, &old); err != nil {
			return fmt.Errorf("manifest.json: %w", err)
		}
	}
	var sums bytes.Buffer
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		gd := filepath.Join(dir, e.Name())
		if !e.IsDir() || !exists(filepath.Join(gd, "kallsyms.xz")) {
			continue
		}
		var g *Guest
		if !exists(filepath.Join(cache, e.Name())) {
			for _, og := range old.Guests {
				if og.Name == e.Name() {
					g = og
				}
			}
			if g == nil {
				return fmt.Errorf("%s: not in the cache %s nor in the previous manifest", e.Name(), cache)
			}
			fmt.Fprintf(os.Stderr, "corpustool: %s: not in the cache, its manifest entry is kept\n", e.Name())
		} else if g, err = guest(e.Name(), gd, filepath.Join(cache, e.Name())); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		for _, f := range g.Files {
			fmt.Fprintf(&sums, "%s  %s/%s\n", f.SHA256, g.Name, f.Name)
		}
		m.Guests = append(m.Guests, g)
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), append(out, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums.Bytes(), 0o644)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func readTrim(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

func readLines(p string) []string {
	s := readTrim(p)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func guest(name, gd, cd string) (*Guest, error) {
	pkg := strings.Fields(readTrim(filepath.Join(gd, "kernel.pkg")))
	if len(pkg) != 2 {
		return nil, fmt.Errorf("bad kernel.pkg")
	}
	g := &Guest{
		Name: name, Arch: name[strings.LastIndexByte(name, '-')+1:], KernelPackage: pkg[0], KernelVersion: pkg[1],
		KallsymsAll:    configSet(cd, "CONFIG_KALLSYMS_ALL"),
		BTF:            ptr(configSet(cd, "CONFIG_DEBUG_INFO_BTF")),
		BPFJIT:         ptr(configSet(cd, "CONFIG_BPF_JIT")),
		VMCOREINFONote: ptr(hasNote(filepath.Join(cd, "qemu.elf"))),
		Uname:          readTrim(filepath.Join(gd, "uname")),
		KernelCmdline:  readTrim(filepath.Join(gd, "cmdline")),
		QEMUVersion:    readTrim(filepath.Join(cd, "qemu.version")),
		QEMUCommand:    relCommand(readTrim(filepath.Join(cd, "qemu.cmdline")), cd),
		QEMUDumps:      readLines(filepath.Join(cd, "qemu.dumpcmds")),
		MakedumpfileV:  readTrim(filepath.Join(cd, "mdf.version")),
		MakedumpfileCs: readLines(filepath.Join(cd, "mdf.cmds")),
		LoadedModules:  readLines(filepath.Join(cd, "modules.load")),
	}
	if k := readTrim(filepath.Join(cd, "kexec.cmd")); k != "" {
		g.Capture = &Capture{KexecVersion: readTrim(filepath.Join(cd, "kexec.version")), KexecCommand: k,
			Status: readLines(filepath.Join(cd, "capture.status"))}
		for _, w := range strings.Fields(g.KernelCmdline) {
			if v, ok := strings.CutPrefix(w, "crashkernel="); ok {
				g.Capture.Crashkernel = v
			}
		}
		// The capture's /proc/vmcore carries the note, not a QEMU dump.
		g.VMCOREINFONote = ptr(hasNote(filepath.Join(cd, "proc-vmcore.elf")))
	}
	t, err := truth(gd)
	if err != nil {
		return nil, err
	}
	g.Truth = *t
	ents, err := os.ReadDir(cd)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !(strings.HasPrefix(n, "qemu.") || strings.HasPrefix(n, "qemu-fixed.") || strings.HasPrefix(n, "mdf-") || strings.HasPrefix(n, "xform-") || strings.HasPrefix(n, "proc-vmcore.")) {
			continue
		}
		if strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".tmp") || !isDump(filepath.Join(cd, n)) {
			continue
		}
		f, err := file(filepath.Join(cd, n))
		if err != nil {
			return nil, err
		}
		g.Files = append(g.Files, f)
	}
	sort.Slice(g.Files, func(i, j int) bool { return g.Files[i].Name < g.Files[j].Name })
	return g, nil
}

func isDump(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 16)
	if _, err := io.ReadFull(f, b); err != nil {
		return false
	}
	return bytes.HasPrefix(b, []byte("\x7fELF")) || bytes.HasPrefix(b, []byte("KDUMP   ")) || bytes.HasPrefix(b, []byte("makedumpfile\x00"))
}

func file(p string) (*File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	info, err := fileCodecs(p)
	if err != nil {
		return nil, err
	}
	return &File{Name: filepath.Base(p), Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Info: info}, nil
}

// truth counts the ground truth. A kallsyms line is "addr type name" for
// vmlinux or "addr type name\t[module]"; [bpf] and [__builtin__*] are
// pseudo-modules.
func truth(gd string) (*Truth, error) {
	out, err := exec.Command("xz", "-dc", filepath.Join(gd, "kallsyms.xz")).Output()
	if err != nil {
		return nil, fmt.Errorf("xz -dc kallsyms.xz: %w", err)
	}
	t := &Truth{OtherByName: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		t.KallsymsLines++
		i := strings.IndexByte(line, '[')
		if i < 0 {
			t.Vmlinux++
			continue
		}
		mod := strings.TrimSuffix(line[i+1:], "]")
		switch {
		case mod == "bpf":
			t.BPF++
		case strings.HasPrefix(mod, "__builtin__"):
			t.Other++
			t.OtherByName[mod]++
		default:
			t.Modules++
		}
	}
	t.ProcModules = len(readLines(filepath.Join(gd, "modules")))
	t.DmesgLines = len(readLines(filepath.Join(gd, "dmesg")))
	t.ConsoleLines = len(readLines(filepath.Join(gd, "console.log")))
	return t, sc.Err()
}

// relCommand makes a recorded command line independent of the cache's
// location: paths in the guest's directory become relative, other paths in
// the cache start with $KDUMP_SYMS_CORPUS.
func relCommand(cmd, guestDir string) string {
	cmd = strings.ReplaceAll(cmd, guestDir+"/", "")
	return strings.ReplaceAll(cmd, filepath.Dir(guestDir)+"/", "$KDUMP_SYMS_CORPUS/")
}

// configSet reports whether the guest's kernel config (in the extracted
// package in the cache) sets option to y.
func configSet(cd, option string) bool {
	cfg, err := os.ReadFile(filepath.Join(cd, "root", "boot", "config-"+readTrim(filepath.Join(cd, "kver"))))
	return err == nil && strings.Contains(string(cfg), "\n"+option+"=y\n")
}

func ptr(b bool) *bool { return &b }

// hasNote reports whether the ELF dump at p has a VMCOREINFO note.
func hasNote(p string) bool {
	_, err := vmcoreinfoNote(p, "")
	return err == nil
}
