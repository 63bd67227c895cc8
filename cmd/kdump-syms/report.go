package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// The exit-status rule, the same for every command.
const (
	exitOK      = 0 // everything asked for was produced
	exitError   = 1 // nothing useful could be produced
	exitUsage   = 2 // the command line is wrong
	exitPartial = 3 // output was produced, but some part failed; stderr says which
)

// report collects what failed during a command and prints each root cause
// once: one line naming the cause and where (the error's own text), one
// more line naming the sources that could not run because of it. With -v
// the full chain of each failure follows, indented.
type report struct {
	verbose bool
	causes  []*cause
	misses  []string // queries that found nothing
	// disagreements are what the user gave that the dump contradicts.
	disagreements []string
	finders       []string // the enabled finders, when misses are possible
	// chain, once the dump is open, holds the failures a lookup's
	// NotFoundError only names.
	chain *symfinder.Chain
}

// cause is one root cause: the source that failed with it first, the
// error, and the sources that needed that source.
type cause struct {
	source  string
	err     error
	blocked []string
	chains  []string // full messages of every failure it caused, for -v
}

// add records a failure: a *symfinder.FinderError, a *kdumpsyms.NeedsError,
// an errors.Join of them, or any other error. The ErrNotFound of a chain
// lookup is not a failure and is dropped: the caller records the miss.
func (r *report) add(err error) {
	if err == nil {
		return
	}
	if subs := joined(err); subs != nil {
		for _, e := range subs {
			r.add(e)
		}
		return
	}
	var nf *symfinder.NotFoundError
	if errors.As(err, &nf) {
		// A miss is not a failure; the finders it could not consult are,
		// each recorded once by the chain.
		if r.chain != nil {
			for _, f := range r.chain.Failures() {
				if slices.Contains(nf.Unconsulted, f.Finder) {
					r.add(f)
				}
			}
		}
		return
	}
	var fe *symfinder.FinderError
	if errors.Is(err, symfinder.ErrNotFound) && !errors.As(err, &fe) {
		return
	}
	// Peel the finder that reported it and the sources that only needed
	// something else that failed.
	source, inner := "", err
	var blocked []string
	for {
		var ne *kdumpsyms.NeedsError
		if f, ok := inner.(*symfinder.FinderError); ok {
			source, inner = f.Finder, f.Err
		} else if errors.As(inner, &ne) {
			blocked = append(blocked, ne.Source)
			source, inner = ne.Needs, ne.Err
		} else {
			break
		}
	}
	if subs := joined(inner); subs != nil {
		for _, e := range subs {
			r.add(&symfinder.FinderError{Finder: source, Err: e})
		}
		return
	}
	if source == "" {
		source = "?"
	}
	c := r.cause(source, inner)
	for _, b := range blocked {
		if b != c.source && !slices.Contains(c.blocked, b) {
			c.blocked = append(c.blocked, b)
		}
	}
	if full := err.Error(); !slices.Contains(c.chains, full) {
		c.chains = append(c.chains, full)
	}
}

// addFrom records the failures of a source that still answered for the
// rest (the modules that failed alone), each as that source's.
func (r *report) addFrom(source string, err error) {
	if subs := joined(err); subs != nil {
		for _, e := range subs {
			r.addFrom(source, e)
		}
		return
	}
	r.add(&symfinder.FinderError{Finder: source, Err: err})
}

// cause returns the cause recorded for err, adding it if new. Two errors
// are one cause when their messages are equal (the session hands the same
// error to every source that needs a failed one), or when one source
// failed both for want of the same page of physical memory (a list walked
// both ways that breaks twice on one page the dump left out).
func (r *report) cause(source string, err error) *cause {
	msg := err.Error()
	page, missing := missingPage(err)
	for _, c := range r.causes {
		if c.err.Error() == msg {
			return c
		}
		if p, ok := missingPage(c.err); missing && ok && p == page && c.source == source {
			return c
		}
	}
	c := &cause{source: source, err: err}
	r.causes = append(r.causes, c)
	return c
}

// missingPage returns the 4 KiB page of the innermost physical-memory
// fault in err's chain, when its cause is memory not in the dump.
func missingPage(err error) (uint64, bool) {
	var page uint64
	found := false
	for e := err; e != nil; e = errors.Unwrap(e) {
		if fe, ok := e.(*memory.FaultError); ok && fe.Space == memory.SpacePhysical {
			page, found = fe.Addr>>12, true
		}
	}
	return page, found && errors.Is(err, memory.ErrNotSaved)
}

// disagree records that what the user gave contradicts the dump: printed
// whatever else failed, and a partial result.
func (r *report) disagree(what string) { r.disagreements = append(r.disagreements, what) }

// miss records a query that found nothing.
func (r *report) miss(what string) { r.misses = append(r.misses, what) }

// failed reports whether anything was recorded.
func (r *report) failed() bool {
	return len(r.causes) > 0 || len(r.misses) > 0 || len(r.disagreements) > 0
}

// print writes the report to w, each line prefixed with "kdump-syms: ".
// Misses are listed unless every finder failed: then the causes explain
// them, and "?" on stdout marks them.
func (r *report) print(w io.Writer) {
	for _, d := range r.disagreements {
		fmt.Fprintf(w, "kdump-syms: %s\n", d)
	}
	for _, c := range r.causes {
		fmt.Fprintf(w, "kdump-syms: %s\n", oneLine(c.source, c.err))
		if len(c.blocked) > 0 {
			verb := "needs"
			if len(c.blocked) > 1 {
				verb = "need"
			}
			fmt.Fprintf(w, "kdump-syms: not run because of it: %s (%s %s)\n", strings.Join(c.blocked, ", "), verb, c.source)
		}
		if r.verbose {
			for _, ch := range c.chains {
				fmt.Fprintf(w, "  chain: %s\n", strings.ReplaceAll(ch, "\n", "\n    "))
			}
			var ce interface{ Candidates() []error }
			if errors.As(c.err, &ce) {
				for i, e := range ce.Candidates() {
					fmt.Fprintf(w, "  candidate %d: %v\n", i+1, e)
				}
			}
		}
	}
	if r.explained() {
		return
	}
	for i, m := range r.misses {
		if i == maxMissLines && len(r.misses) > maxMissLines+1 {
			fmt.Fprintf(w, "kdump-syms: and %d more not found\n", len(r.misses)-i)
			break
		}
		fmt.Fprintf(w, "kdump-syms: %s: not found\n", m)
	}
}

// maxMissLines is how many misses are named one a line before the rest
// are counted.
const maxMissLines = 5

// explained reports whether every finder the command asked failed, so
// that the misses follow from the causes already printed.
func (r *report) explained() bool {
	if len(r.finders) == 0 {
		return false
	}
	for _, f := range r.finders {
		if !slices.ContainsFunc(r.causes, func(c *cause) bool { return c.source == f || slices.Contains(c.blocked, f) }) {
			return false
		}
	}
	return true
}

// finish prints the report and returns the command's outcome: nil when
// nothing failed, else exitPartial when produced (some output was useful)
// or exitError when not.
func (r *report) finish(w io.Writer, produced bool) error {
	if !r.failed() {
		return nil
	}
	r.print(w)
	if produced {
		return exitCode(exitPartial)
	}
	return exitCode(exitError)
}

// fatal reports err as the one failure of a command that produced nothing.
func (r *report) fatal(w io.Writer, err error) error {
	r.add(err)
	return r.finish(w, false)
}

// joined returns the errors of an errors.Join (or any multi-error whose
// message is just its parts' messages, one a line), else nil.
func joined(err error) []error {
	m, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	subs := m.Unwrap()
	msgs := make([]string, 0, len(subs))
	for _, e := range subs {
		if e != nil {
			msgs = append(msgs, e.Error())
		}
	}
	if strings.Join(msgs, "\n") != err.Error() {
		return nil
	}
	return subs
}

// oneLine renders a root cause as one line: the source, then the error's
// message with the package prefixes that repeat the source dropped and any
// line breaks of joined parts turned into "; ".
func oneLine(source string, err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	for _, p := range []string{"kdumpsyms: ", source + ": "} {
		for strings.HasPrefix(msg, p) {
			msg = strings.TrimPrefix(msg, p)
		}
	}
	msg += remedyText(err)
	if source == "?" {
		return msg
	}
	return source + ": " + msg
}

// remedyText renders the remedies err carries (memory.Remedies) as this
// program's flags.
func remedyText(err error) string {
	var b strings.Builder
	for _, r := range memory.Remedies(err) {
		switch r {
		case memory.SupplyLayouts:
			b.WriteString(" (supply the kernel's BTF or a layout table: --btf FILE or --layout FILE)")
		case memory.SupplyVMCOREINFO:
			b.WriteString(" (--vmcoreinfo FILE supplies the text)")
		case memory.SupplyArch:
			b.WriteString(" (name it with --arch NAME)")
		case memory.SupplySplitParts:
			b.WriteString(": name them with --part FILE")
		}
	}
	return b.String()
}
