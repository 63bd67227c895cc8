package vmcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// crossCheckScanLimit caps the memory scan that looks for the in-memory
// note of a dump whose container carries VMCOREINFO: the note is
// allocated early in boot and lies in the first 32 MiB of every guest
// examined (docs/formats.md §7.8), so a scan of up to 1 GiB finds it
// without reading the whole of a large dump.
const crossCheckScanLimit = 1 << 30

// InfoCheck says how the VMCOREINFO a container carries was checked
// against the memory it describes (docs/formats.md §2.8).
type InfoCheck struct {
	// Container is the cheap validation of the container's copy
	// (OSRELEASE against init_uts_ns); its Origin.Kind is "" when the
	// container carries no VMCOREINFO or Options.VMCOREINFO replaced it.
	Container InfoVerdict
	// Memory is where the in-memory note was found; its Kind is "" when
	// it was not looked for (the container's copy validated and
	// Options.CheckInfo was not set, or the scan is disabled) or not
	// found.
	Memory InfoOrigin
	// Differ reports that the two texts differ. Then Verdicts judges
	// each, the container's first, with every check (Options.ValidateInfo
	// too), and Open used the first that validates (the container's when
	// neither does).
	Differ   bool
	Verdicts []InfoVerdict
}

// InfoVerdict is the validation of one VMCOREINFO text.
type InfoVerdict struct {
	Origin InfoOrigin
	// Problems lists what failed to validate; empty when it validates.
	Problems []string
	// Checked lists what was checked and held.
	Checked []string
	// Unchecked lists what could not be checked because the memory it
	// needs is not in the dump (an extract, a filtered dump).
	Unchecked []string
}

// Valid reports whether the text validated.
func (v InfoVerdict) Valid() bool { return len(v.Problems) == 0 }

// InfoCheck returns how the container's VMCOREINFO was checked.
func (d *Dump) InfoCheck() InfoCheck { return d.check }

// crossCheck validates the container's VMCOREINFO against memory: the
// cheap check (OSRELEASE against init_uts_ns) always; when it fails or
// cannot be made (init_uts_ns not saved, as in an extract), or with
// Options.CheckInfo, it also finds the note in memory, and when the
// two differ validates each fully and keeps the one that validates. It
// runs before the architecture is resolved; a is the container's (or
// Options.Arch).
func (d *Dump) crossCheck(a Arch, opt Options) {
	d.check.Container = InfoVerdict{Origin: d.origin}
	c := &d.check.Container
	c.Checked, c.Unchecked, c.Problems = d.validateInfo(a, d.raw, d.noteOrder, nil)
	if opt.ScanLimit < 0 || (c.Valid() && len(c.Unchecked) == 0 && !opt.CheckInfo) {
		return
	}
	limit := int64(crossCheckScanLimit)
	if opt.ScanLimit > 0 {
		limit = min(limit, opt.ScanLimit)
	}
	at, text, src, bo, ok := d.noteInMemory(a, limit)
	if !ok {
		return
	}
	d.check.Memory = InfoOrigin{Kind: src, Addr: at}
	if bytes.Equal(trimNote(text), trimNote(d.raw)) {
		return
	}
	d.check.Differ = true
	cands := []struct {
		origin InfoOrigin
		text   []byte
		order  binary.ByteOrder
	}{{d.origin, d.raw, d.noteOrder}, {d.check.Memory, text, bo}}
	for _, c := range cands {
		v := InfoVerdict{Origin: c.origin}
		v.Checked, v.Unchecked, v.Problems = d.validateInfo(a, c.text, c.order, opt.ValidateInfo)
		d.check.Verdicts = append(d.check.Verdicts, v)
	}
	if !d.check.Verdicts[0].Valid() && d.check.Verdicts[1].Valid() {
		d.origin = d.check.Memory
		d.raw = text
		d.infoSource = fmt.Sprintf("%s at %#x", src, at)
		d.noteOrder = bo
	}
}

// trimNote drops the NUL padding and trailing newlines a copy may add.
func trimNote(b []byte) []byte { return bytes.TrimRight(b, "\x00\n") }

// utsLen is __NEW_UTS_LEN + 1, the size of each field of struct
// new_utsname (sysname, nodename, release, ...).
const utsLen = 65

// validateInfo checks a VMCOREINFO text against the memory it describes:
// it must parse, give a translation, have OSRELEASE equal to the release
// in init_uts_ns, and pass extra when not nil (the kallsyms check).
func (d *Dump) validateInfo(a Arch, text []byte, memOrder binary.ByteOrder, extra func(memory.Reader, *vmcoreinfo.Info) (string, error)) (checked, unchecked, problems []string) {
	info, err := vmcoreinfo.Parse(text)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("does not parse: %v", err)}
	}
	arch, err := resolveArch(a, info, memOrder)
	if err != nil {
		return nil, nil, []string{err.Error()}
	}
	if arch.Name == "" {
		return nil, []string{"the architecture is unknown"}, nil
	}
	arch.PageSize = defaultPageSize(arch.Name)
	if ps, ok := info.PageSize(); ok && ps <= 1<<30 {
		arch.PageSize = int(ps)
	}
	t, err := vtop.New(vtop.Config{Arch: arch.Name, Target: arch.Target,
		Info: info, Phys: d.phys, Virtual: d.be.virtual(), PhysBase: d.be.physBase()})
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("no kernel address space: %v", err)}
	}
	rel := info.OSRelease()
	if got, err := utsRelease(t, info); errors.Is(err, memory.ErrNotSaved) {
		unchecked = append(unchecked, "OSRELEASE (init_uts_ns is not in the dump)")
	} else if errors.Is(err, vmcoreinfo.ErrMissingInfo) {
		unchecked = append(unchecked, "OSRELEASE (no SYMBOL(init_uts_ns))")
	} else if err != nil {
		problems = append(problems, fmt.Sprintf("init_uts_ns: %v", err))
	} else if got != rel {
		problems = append(problems, fmt.Sprintf("OSRELEASE %q, init_uts_ns says %q", rel, got))
	} else {
		checked = append(checked, "OSRELEASE matches init_uts_ns")
	}
	if extra != nil {
		if what, err := extra(t, info); err != nil {
			problems = append(problems, err.Error())
		} else if what != "" {
			checked = append(checked, what)
		}
	}
	return checked, unchecked, problems
}

// utsRelease reads the release field of init_uts_ns (struct uts_namespace):
// its struct new_utsname starts at offset 0 (v5.11+) or after a 4-byte
// kref, and begins with sysname "Linux".
func utsRelease(kmem memory.Reader, info *vmcoreinfo.Info) (string, error) {
	addr, ok := info.Symbol("init_uts_ns")
	if !ok {
		return "", fmt.Errorf("no SYMBOL(init_uts_ns): %w", vmcoreinfo.ErrMissingInfo)
	}
	var b [4 + 3*utsLen]byte
	if err := memory.ReadFull(kmem, b[:], addr); err != nil {
		return "", err
	}
	for _, off := range []int{0, 4} {
		if string(b[off:off+6]) == "Linux\x00" {
			rel := b[off+2*utsLen : off+3*utsLen]
			if i := bytes.IndexByte(rel, 0); i >= 0 {
				rel = rel[:i]
			}
			return string(rel), nil
		}
	}
	return "", fmt.Errorf("no utsname (sysname \"Linux\") at %#x: %w", addr, memory.ErrCorrupt)
}

// String summarises the check for humans: "" when there was nothing to
// check.
func (c InfoCheck) String() string {
	var own string
	switch v := c.Container; {
	case v.Origin.Kind == "":
		return ""
	case v.Valid():
		own = strings.Join(v.Checked, ", ")
		if len(v.Unchecked) > 0 {
			if own != "" {
				own += "; "
			}
			own += "not checked: " + strings.Join(v.Unchecked, ", ")
		}
	default:
		own = "does not validate: " + strings.Join(v.Problems, "; ")
	}
	switch {
	case c.Memory.Kind == "":
		return own
	case !c.Differ:
		return fmt.Sprintf("%s; agrees with the note in memory at %#x", own, c.Memory.Addr)
	}
	var parts []string
	for _, v := range c.Verdicts {
		name := v.Origin.Kind
		if v.Origin.InMemory() {
			name = fmt.Sprintf("the note in memory at %#x", v.Origin.Addr)
		}
		if v.Valid() {
			what := slices.Concat(v.Checked, prefixed("not checked: ", v.Unchecked))
			parts = append(parts, fmt.Sprintf("%s validates (%s)", name, strings.Join(what, ", ")))
		} else {
			parts = append(parts, fmt.Sprintf("%s does not (%s)", name, strings.Join(v.Problems, "; ")))
		}
	}
	used := "the container's"
	if len(c.Verdicts) == 2 && !c.Verdicts[0].Valid() && c.Verdicts[1].Valid() {
		used = "the note in memory"
	}
	return "differs from the note in memory: " + strings.Join(parts, "; ") + "; using " + used
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}
