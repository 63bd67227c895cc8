package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/ulikunitz/xz"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/export"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// cmdExport writes the dump's symbols as files other tools read: with
// --format elf, vmlinux.syms and one MODULE.ko.syms per module (package
// export), for gdb's symbol-file and add-symbol-file, nm and readelf; with
// --format isf, a volatility3 symbol table of the kernel.
func cmdExport(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("export", "export [flags] --format elf -o DIR VMCORE | --format isf -o FILE.json VMCORE")
	c.register(fs)
	format := fs.String("format", "elf", "output `format`: elf (DIR/vmlinux.syms and DIR/MODULE.ko.syms, ELF symbol files), isf (FILE: a volatility3 symbol table, JSON; xz-compressed when FILE ends in .xz)")
	out := fs.String("o", "", "output `DIR` for elf (created if needed; files of the same names are replaced), FILE for isf (its directory created if needed)")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("export: no VMCORE given")
	case *out == "" && *format == "isf":
		return usagef("export: no output file given (-o FILE)")
	case *out == "":
		return usagef("export: no output directory given (-o DIR)")
	case *format != "elf" && *format != "isf":
		return usagef("export: --format %q: elf or isf", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	kres, err := s.Kallsyms()
	if err != nil {
		return c.rep.fatal(stderr, err)
	}
	all := func(f symfinder.Finder) ([]symfinder.Symbol, error) {
		var syms []symfinder.Symbol
		err := f.Find(symfinder.Query{Kind: symfinder.All}, func(sym symfinder.Symbol) bool {
			syms = append(syms, sym)
			return true
		})
		return syms, err
	}
	vmlinux, err := all(kres.Finder())
	if err != nil {
		return c.rep.fatal(stderr, err)
	}
	if *format == "isf" {
		return exportISF(&c, s, vmlinux, *out, stdout, stderr)
	}
	var mods []export.Module
	if set, merr := s.Modules(); set != nil {
		for _, m := range set.Modules() {
			if m.Symbols == nil {
				continue // reported by addModuleFailures
			}
			syms, err := all(m.Symbols)
			if err != nil {
				c.rep.add(err)
				continue
			}
			mods = append(mods, export.Module{Name: m.Name, Sections: export.ModuleSections(m.Regions), Symbols: syms})
		}
		c.addModuleFailures(s)
	} else {
		c.rep.add(merr)
	}
	a := s.Dump().Arch()
	t := export.Target{Target: a.Target, Machine: a.ELFMachine()}
	written, err := export.WriteDir(*out, t, vmlinux, mods)
	w := bufio.NewWriter(stdout)
	for _, p := range written {
		fmt.Fprintln(w, p)
	}
	if ferr := w.Flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		c.rep.add(err)
	}
	if len(written) == 0 {
		return c.rep.finish(stderr, false)
	}
	return c.rep.finish(stderr, true)
}

// maxBanner bounds the read of linux_banner ("Linux version RELEASE
// (BUILDER) (COMPILER) VERSION\n": some 200 bytes).
const maxBanner = 1024

// exportISF writes the kernel's volatility3 symbol table to path (its
// directory created if needed: volatility3 wants it in a linux/
// directory of a symbol directory): types
// from the dump's BTF (or --btf), symbols from kallsyms at link-time
// addresses, linux_banner's bytes from the dump. Without a readable
// banner the file is written and the command exits 3: volatility3 cannot
// match it to an image.
func exportISF(c *common, s *kdumpsyms.Session, vmlinux []symfinder.Symbol, path string, stdout, stderr io.Writer) error {
	b, _, err := s.BTF()
	if err != nil {
		return c.rep.fatal(stderr, fmt.Errorf("ISF types need the kernel's BTF: %w", err))
	}
	spec, err := b.Spec()
	if err != nil {
		return c.rep.fatal(stderr, err)
	}
	a := s.Dump().Arch()
	in := &export.ISF{
		Producer: "kdump-syms", Version: export.ISFVersion(buildVersion()),
		Spec: spec, Target: a.Target, Symbols: vmlinux,
	}
	// With the offset unknown (i386), symbols keep the addresses the
	// kernel ran at: volatility3 measures its shift from linux_banner's,
	// which then is 0, so its addresses still come out right.
	in.KASLROffset, _ = s.KASLROffset()
	if info := s.Dump().Info(); info != nil && (a.Name == "x86_64" || a.Name == "i386") {
		// Linux 6.2 builds with -funsigned-char everywhere; x86 char was
		// signed before.
		in.CharSigned = releaseBefore(info.OSRelease(), 6, 2)
	}
	banner, err := readBanner(s, vmlinux)
	if err != nil {
		c.rep.add(fmt.Errorf("linux_banner (volatility3 identifies the kernel by it): %w", err))
	} else {
		in.Banner = banner
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return c.rep.fatal(stderr, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return c.rep.fatal(stderr, err)
	}
	var w io.Writer = f
	var xw *xz.Writer
	if strings.HasSuffix(path, ".xz") {
		if xw, err = xz.NewWriter(f); err != nil {
			f.Close()
			return c.rep.fatal(stderr, err)
		}
		w = xw
	}
	_, err = export.WriteISF(w, in)
	if xw != nil {
		if cerr := xw.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return c.rep.fatal(stderr, fmt.Errorf("export: %s: %w", path, err))
	}
	if _, err := fmt.Fprintln(stdout, path); err != nil {
		return err
	}
	return c.rep.finish(stderr, true)
}

// readBanner reads the NUL-terminated linux_banner, the NUL included.
func readBanner(s *kdumpsyms.Session, vmlinux []symfinder.Symbol) ([]byte, error) {
	i := slices.IndexFunc(vmlinux, func(sym symfinder.Symbol) bool { return sym.Name == "linux_banner" })
	if i < 0 {
		return nil, errors.New("no linux_banner symbol")
	}
	kmem, err := s.Kernel()
	if err != nil {
		return nil, err
	}
	addr := vmlinux[i].Addr
	buf := make([]byte, maxBanner)
	n, rerr := kmem.ReadAt(buf, addr)
	if end := bytes.IndexByte(buf[:n], 0); end >= 0 {
		if !bytes.HasPrefix(buf, []byte("Linux version ")) {
			return nil, fmt.Errorf("at %#x: %q is no banner", addr, buf[:min(end, 40)])
		}
		return buf[:end+1], nil
	}
	if rerr != nil {
		return nil, fmt.Errorf("at %#x: %w", addr, rerr)
	}
	return nil, fmt.Errorf("at %#x: no NUL in %d bytes", addr, maxBanner)
}

// releaseBefore says whether a kernel release ("6.1.0-37-amd64") is older
// than major.minor; an unparsable one is not.
func releaseBefore(rel string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(rel, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma < major || (ma == major && mi < minor)
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
