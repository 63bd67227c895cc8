package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// infoReport is what "info --format json" prints: one object, with the
// fields a triage script reads first (release, build_id) at the top level.
// Fields the dump does not determine are omitted; a source that failed
// has its "error".
type infoReport struct {
	Files        []string    `json:"files"`
	Format       string      `json:"format"`
	Architecture archReport  `json:"architecture"`
	PageSize     int         `json:"page_size"`
	Release      string      `json:"release,omitempty"`
	BuildID      string      `json:"build_id,omitempty"`
	KASLROffset  string      `json:"kaslr_offset,omitempty"`
	CrashTime    string      `json:"crash_time,omitempty"` // RFC 3339, UTC
	CrashTimeSec *uint64     `json:"crash_time_unix,omitempty"`
	VMCOREINFO   sourceState `json:"vmcoreinfo"`
	// DeriveError says why VMCOREINFO could not be derived from a memory
	// image that carries none.
	DeriveError string `json:"vmcoreinfo_derive_error,omitempty"`
	CPUs        int    `json:"cpus"`
	// The rest needs the symbols decoded; absent with --no-symbols.
	Translation *sourceState   `json:"translation,omitempty"`
	Kallsyms    *sourceState   `json:"kallsyms,omitempty"`
	Modules     *moduleReport  `json:"modules,omitempty"`
	Finders     []finderReport `json:"finders,omitempty"`
	KernelLog   *sourceState   `json:"kernel_log,omitempty"`
	// Layouts says where the struct layouts came from and, when inferred,
	// every offset with its evidence, and the module list head.
	Layouts *layoutReport `json:"layouts,omitempty"`

	hasInfo  bool      // the dump has VMCOREINFO
	failures []failure // what the report found broken, for stderr
}

type layoutReport struct {
	How    string   `json:"how"`
	Detail []string `json:"detail,omitempty"`
}

// failure is one broken source found while reporting, reported on stderr
// as that source's.
type failure struct {
	source string
	err    error
}

type archReport struct {
	Name        string `json:"name,omitempty"`
	ByteOrder   string `json:"byte_order,omitempty"` // "little" or "big"
	PointerSize int    `json:"pointer_size,omitempty"`
	Source      string `json:"source,omitempty"` // "elf", "kdump-header", "vmcoreinfo"
}

// sourceState says where something came from and how, or why it failed.
type sourceState struct {
	Source   string `json:"source,omitempty"`
	Describe string `json:"describe,omitempty"`
	Error    string `json:"error,omitempty"`
}

type moduleReport struct {
	Loaded  int    `json:"loaded"`
	Symbols int    `json:"symbols"`
	Error   string `json:"error,omitempty"`
	// unavailable: no module list at all (Error says why), rather than
	// some modules failing.
	unavailable bool
}

type finderReport struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Symbols int    `json:"symbols"`
	Error   string `json:"error,omitempty"`
	// Heads are the list heads a pseudo-module finder read, and how each
	// was found.
	Heads []headReport `json:"list_heads,omitempty"`
}

type headReport struct {
	Symbol string `json:"symbol"`
	Addr   string `json:"address"` // hex: JSON numbers lose precision above 2^53
	How    string `json:"how"`
}

// dumpReport fills what the dump and its VMCOREINFO say, decoding nothing.
func dumpReport(s *kdumpsyms.Session, files []string) *infoReport {
	d := s.Dump()
	arch := d.Arch()
	r := &infoReport{
		Files:    files,
		Format:   d.Format(),
		PageSize: d.PageSize(),
		CPUs:     len(d.CPUs()),
		Architecture: archReport{
			Name: arch.Name, PointerSize: arch.PtrSize, Source: arch.Source,
		},
		VMCOREINFO: sourceState{Source: d.InfoSource(), Describe: d.InfoCheck().String()},
	}
	if arch.ByteOrder != nil {
		r.Architecture.ByteOrder = strings.ToLower(strings.TrimSuffix(arch.ByteOrder.String(), "Endian"))
	}
	if err := d.DeriveErr(); err != nil {
		r.DeriveError = err.Error()
	}
	if in := d.Info(); in != nil {
		r.hasInfo = true
		r.Release = in.OSRelease()
		r.BuildID, _ = in.BuildID()
		if off, ok := in.KernelOffset(); ok {
			r.KASLROffset = fmt.Sprintf("%#x", off)
		}
		if ct, ok := in.CrashTime(); ok {
			r.CrashTime = time.Unix(int64(ct), 0).UTC().Format(time.RFC3339)
			r.CrashTimeSec = &ct
		}
	} else if err := d.InfoErr(); err != nil {
		r.VMCOREINFO.Error = err.Error()
		r.failures = append(r.failures, failure{"vmcoreinfo", err})
	}
	return r
}

// symbolReport adds what decoding the symbols tells.
func symbolReport(s *kdumpsyms.Session, r *infoReport) {
	kall, kallErr := s.Kallsyms()
	set, modErr := s.Modules()
	r.Translation = &sourceState{}
	if tr, err := s.Dump().Translator(); err != nil {
		r.Translation.Error = err.Error()
		r.failures = append(r.failures, failure{kdumpsyms.NeedTranslation, err})
	} else {
		r.Translation.Describe = tr.Describe()
	}
	r.Kallsyms = &sourceState{}
	if kallErr != nil {
		r.Kallsyms.Error = kallErr.Error()
	} else {
		r.Kallsyms.Source = string(kall.Layout.Source)
		r.Kallsyms.Describe = strings.ReplaceAll(kall.Describe(), "kallsyms: ", "")
	}
	r.Modules = &moduleReport{unavailable: set == nil}
	if set != nil {
		for _, m := range set.Modules() {
			r.Modules.Loaded++
			if m.Symbols != nil {
				r.Modules.Symbols += m.Symbols.Len()
			}
		}
	}
	if modErr != nil {
		r.Modules.Error = modErr.Error()
	}
	for _, f := range s.Chain().Finders() {
		fd, _ := s.Chain().Finder(f.Name)
		fr := finderReport{Name: f.Name, Enabled: f.Enabled}
		if err := fd.Find(symfinder.Query{Kind: symfinder.All}, func(symfinder.Symbol) bool { fr.Symbols++; return true }); err != nil {
			fr.Error = err.Error()
			fr.Symbols = 0
			r.failures = append(r.failures, failure{f.Name, err})
		}
		for _, h := range pseudoHeads(s, f.Name) {
			fr.Heads = append(fr.Heads, headReport{Symbol: h.Symbol, Addr: fmt.Sprintf("%#x", h.Addr), How: h.How})
		}
		r.Finders = append(r.Finders, fr)
	}
	how, detail := describeLayouts(s)
	r.Layouts = &layoutReport{How: how}
	for _, line := range strings.Split(strings.TrimSpace(detail), "\n") {
		if line != "" {
			r.Layouts.Detail = append(r.Layouts.Detail, strings.TrimSpace(line))
		}
	}
	r.KernelLog = &sourceState{}
	if l, err := s.Log(); err != nil {
		r.KernelLog.Error = err.Error()
	} else {
		r.KernelLog.Source = l.Format().String()
		r.KernelLog.Describe = l.Describe()
	}
}

func writeInfoJSON(w io.Writer, r *infoReport) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
