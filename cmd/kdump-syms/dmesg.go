package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kdumpsyms/kdumpsyms"
	"github.com/kdumpsyms/kdumpsyms/oops"
	"github.com/kdumpsyms/kdumpsyms/printk"
)

func cmdDmesg(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("dmesg", "dmesg [flags] VMCORE")
	c.register(fs)
	c.lazy = true // --symbolize looks up a few addresses: decode names on demand
	fs.Lookup("lazy").DefValue = "true"
	format := fs.String("format", "text", "output `format`: text (as dmesg prints it) or json (one record a line)")
	symbolize := fs.Bool("symbolize", false, "append name+0xoff/0xsize [module] after each kernel address in the text")
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("dmesg: no VMCORE given")
	}
	if *format != "text" && *format != "json" {
		return usagef("dmesg: unknown format %q (want text or json)", *format)
	}
	s, err := c.open(pos, stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	log, err := s.Log()
	if err != nil {
		return err
	}
	var sym func(string) string
	if *symbolize {
		digits, minAddr := addrShape(s)
		sym = logSymbolizer(oops.New(oops.Options{Resolver: s.Chain(), Digits: digits, MinAddr: minAddr, Format: c.formatter()}))
	}
	var lw logWriter
	bw := bufio.NewWriterSize(stdout, 64<<10)
	if *format == "json" {
		lw = &jsonLog{w: bw, sym: sym}
	} else {
		lw = &textLog{w: bw, sym: sym}
	}
	var lost []*printk.Gap
	err = s.Phase("output", func() error {
		for e := range log.Entries() {
			if e.Gap != nil && !errors.Is(e.Gap.Err, printk.ErrIncomplete) {
				lost = append(lost, e.Gap)
			}
			if err := lw.write(e); err != nil {
				return err
			}
		}
		if err := lw.end(); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		// The rest of the log was printed: say what is missing, once.
		n := uint64(0)
		for _, g := range lost {
			n += g.Count
		}
		fmt.Fprintf(stderr, "kdump-syms: dmesg: %d gaps in the log (%d records known lost); the first: %v\n", len(lost), n, lost[0])
		return exitCode(exitPartial)
	}
	return nil
}

// logSymbolizer symbolizes the text of log records with the oops reader
// of "addr -", line by line; its state (whether the lines are inside a
// call trace) carries from one record to the next, as a trace spans
// records.
func logSymbolizer(o *oops.Annotator) func(string) string {
	return func(text string) string {
		var b strings.Builder
		for line := range strings.SplitAfterSeq(text, "\n") {
			b.WriteString(o.Line(line))
		}
		return b.String()
	}
}

// addrShape returns how kernel addresses look in the dump's text: their
// hex width and the lowest one worth a lookup.
func addrShape(s *kdumpsyms.Session) (int, uint64) {
	arch := s.Dump().Arch()
	return arch.AddrDigits(), arch.KernelStart()
}

type logWriter interface {
	write(printk.Entry) error
	end() error
}

// textLog prints records as dmesg and the kernel's syslog reader do:
// "[    1.234567] text", each line of a multi-line record with its own
// prefix, and fragments of continuation lines joined where the kernel
// joined them (see printk.Record.NoPrefix).
type textLog struct {
	w       *bufio.Writer
	sym     func(string) string
	midLine bool // the last record ended without a newline
}

func (t *textLog) write(e printk.Entry) error {
	if e.Gap != nil {
		if t.midLine {
			t.w.WriteByte('\n')
			t.midLine = false
		}
		_, err := fmt.Fprintf(t.w, "** %s **\n", strings.TrimPrefix(e.Gap.Error(), "printk: "))
		return err
	}
	r := &e.Record
	if t.midLine && !r.NoPrefix {
		t.w.WriteByte('\n')
	}
	prefix := "[" + r.Timestamp() + "] "
	text := r.Text
	for i := 0; ; i++ {
		line, rest, more := strings.Cut(text, "\n")
		if i > 0 || !r.NoPrefix {
			t.w.WriteString(prefix)
		}
		if t.sym != nil {
			line = t.sym(line)
		}
		t.w.WriteString(line)
		if !more {
			break
		}
		t.w.WriteByte('\n')
		text = rest
	}
	t.midLine = r.NoNewline
	if !t.midLine {
		if err := t.w.WriteByte('\n'); err != nil {
			return err
		}
	}
	return nil
}

func (t *textLog) end() error {
	if t.midLine {
		return t.w.WriteByte('\n')
	}
	return nil
}

// jsonLog prints one JSON object a line: each record as stored, each gap
// as {"gap": ...}.
type jsonLog struct {
	w   *bufio.Writer
	sym func(string) string
}

type jsonRecord struct {
	Seq       *uint64     `json:"seq,omitempty"`
	TS        json.Number `json:"ts"`
	TSNsec    uint64      `json:"ts_nsec"`
	Level     uint8       `json:"level"`
	Facility  uint8       `json:"facility"`
	Caller    string      `json:"caller,omitempty"`
	Text      string      `json:"text"`
	Dict      string      `json:"dict,omitempty"`
	Truncated bool        `json:"truncated,omitempty"`
	Cont      bool        `json:"cont,omitempty"`
}

type jsonGap struct {
	Gap struct {
		FirstSeq *uint64 `json:"first_seq,omitempty"`
		Count    uint64  `json:"count,omitempty"`
		Addr     string  `json:"addr"`
		Error    string  `json:"error"`
	} `json:"gap"`
}

func (j *jsonLog) write(e printk.Entry) error {
	var v any
	if g := e.Gap; g != nil {
		var jg jsonGap
		if g.SeqKnown {
			jg.Gap.FirstSeq = &g.FirstSeq
		}
		jg.Gap.Count = g.Count
		jg.Gap.Addr = fmt.Sprintf("%#x", g.Addr)
		jg.Gap.Error = g.Err.Error()
		v = jg
	} else {
		r := &e.Record
		jr := jsonRecord{
			TS:        json.Number(strings.TrimSpace(r.Timestamp())),
			TSNsec:    r.TimeNS,
			Level:     r.Level,
			Facility:  r.Facility,
			Caller:    r.Caller(),
			Text:      r.Text,
			Dict:      r.Dict,
			Truncated: r.Truncated,
			Cont:      r.Flags&printk.FlagCont != 0,
		}
		if r.SeqKnown {
			jr.Seq = &r.Seq
		}
		if j.sym != nil {
			lines := strings.Split(jr.Text, "\n")
			for i := range lines {
				lines[i] = j.sym(lines[i])
			}
			jr.Text = strings.Join(lines, "\n")
		}
		v = jr
	}
	// Text such as "[<ffffffff8110a2b4>]" stays readable: no HTML escapes.
	enc := json.NewEncoder(j.w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v) // with its newline
}

func (j *jsonLog) end() error { return nil }
