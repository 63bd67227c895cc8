package main

import (
	"errors"
	"fmt"
	"github.com/kdumpsyms/kdumpsyms/memimage"
	"io"
	"time"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/extract"
)

// consumerWhy explains each consumer of the extract report.
var consumerWhy = map[string]string{
	"vmcoreinfo":  "the VMCOREINFO note in memory (for readers that scan for it)",
	"translation": "top-level page table and translation setup",
	"kallsyms":    "the whole kallsyms tables (for eager and lazy decoding)",
	"btf":         "the kernel's BTF (struct module layout)",
	"modules":     "struct module, module symtabs/strtabs, module page tables",
	"finders":     "other finders' All (BPF, ftrace, kprobes)",
	"printk":      "the kernel log (descriptors, infos and text of the printk ring)",
	"stacks":      "each CPU's stack frames and the unwind tables the walk reads",
	"tasks":       "the task list (ps) and each task's stack (bt; x86_64, arm64)",
	"page tables": "page tables mapping every module, BPF and trampoline symbol",
	"keep":        "--keep ranges",
}

func cmdExtract(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("extract", "extract [flags] -o OUT VMCORE")
	var (
		parts, keeps multiFlag
		rep          report
		layouts      layoutFlags
		out          = fs.String("o", "", "write the extract to `file` (file.1 … file.N for a split dump)")
		format       = fs.String("format", "", "output container: elf (default: the input's own)")
		force        = fs.Bool("force", false, "replace existing output files")
	)
	fs.Var(&parts, "part", "another part of a split dump (repeatable)")
	fs.BoolVar(&rep.verbose, "v", false, "verbose errors: the full chain of every failure")
	fs.Var(&keeps, "keep", "also keep `range` p:0xSTART-0xEND (physical) or v:0xSTART-0xEND (kernel virtual), END exclusive (repeatable)")
	// The layout sources the other commands take, so that an extract
	// records the module pages a --btf or --layout file lets them decode.
	layouts.register(fs)
	var raw []memimage.RawRange
	fs.Func("raw", "read VMCORE as a raw physical memory image at `BASE[:SIZE][,...]` (as for the other commands)", func(v string) error {
		l, err := memimage.ParseRawLayout(v)
		raw = l
		return err
	})
	arch := fs.String("arch", "", "the dump's architecture `NAME` when neither the container nor VMCOREINFO tells")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	var sopt kdumpsyms.Options
	sopt.Dump.Raw, sopt.Dump.Arch = raw, *arch
	if err := layouts.apply(&sopt); err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("extract: no VMCORE given")
	case len(pos) > 1:
		return usagef("extract: one VMCORE only (name other parts of a split dump with --part)")
	case *out == "":
		return usagef("extract: no output file given (-o OUT)")
	case *format != "" && *format != "elf":
		return usagef("extract: --format %q: only elf", *format)
	}
	var ranges []extract.Range
	for _, k := range keeps {
		r, err := extract.ParseRange(k)
		if err != nil {
			return usagef("extract: --keep: %v", err)
		}
		ranges = append(ranges, r)
	}
	started := time.Now()
	stop := progress(stderr, "extracting "+pos[0])
	res, err := extract.Extract(*out, append(pos, parts...), extract.Options{Session: sopt, Format: *format, Keep: ranges, Force: *force})
	stop()
	if err != nil {
		if errors.Is(err, extract.ErrExists) {
			return usageError{err.Error()}
		}
		return rep.fatal(stderr, err)
	}
	fmt.Fprintf(stderr, "kdump-syms: extract: kept %d pages of %d bytes (%s); %d pages read are not in the input\n",
		res.Pages, res.PageSize, mib(int64(res.Pages)*int64(res.PageSize)), res.NotSaved)
	for i, c := range res.Consumers {
		state := consumerWhy[c.Name]
		if c.Err != nil {
			state = "failed, see below"
			rep.addFrom(c.Name, c.Err)
		}
		fmt.Fprintf(stderr, "  %-12s %6d pages %9s  %s\n", c.Name, res.Saved[i], mib(int64(res.Saved[i])*int64(res.PageSize)), state)
	}
	fmt.Fprintf(stderr, "kdump-syms: extract: wrote %s, %d file(s), %s, in %s\n", res.Format, len(res.Files), mib(res.Bytes), time.Since(started).Round(time.Millisecond))
	for _, f := range res.Files {
		fmt.Fprintln(stdout, f)
	}
	// The extract was written; a consumer that failed made it smaller.
	return rep.finish(stderr, true)
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
