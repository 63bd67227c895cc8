package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// symbolWriter prints symbols in one of the output formats.
type symbolWriter struct {
	w       *bufio.Writer
	format  string
	digits  int // address width: 16 on 64-bit kernels, 8 on 32-bit
	started bool
}

var formats = []string{"kallsyms", "system.map", "json", "csv"}

func newSymbolWriter(w io.Writer, format string, ptrSize int) (*symbolWriter, error) {
	switch format {
	case "kallsyms", "system.map", "json", "csv":
	default:
		return nil, fmt.Errorf("unknown format %q (want one of kallsyms, system.map, json, csv)", format)
	}
	digits := 16
	if ptrSize == 4 {
		digits = 8
	}
	return &symbolWriter{w: bufio.NewWriterSize(w, 256<<10), format: format, digits: digits}, nil
}

// appendHex appends v in lowercase hex, zero-padded to digits (at most 16;
// wider values print in full).
func appendHex(b []byte, v uint64, digits int) []byte {
	const hex = "0123456789abcdef"
	n := 1
	for x := v >> 4; x != 0; x >>= 4 {
		n++
	}
	n = max(n, digits)
	var tmp [16]byte
	for i := n - 1; i >= 0; i-- {
		tmp[i] = hex[v&15]
		v >>= 4
	}
	return append(b, tmp[:n]...)
}

type jsonSymbol struct {
	Addr        string `json:"addr"`
	Type        string `json:"type"`
	Name        string `json:"name"`
	Size        uint64 `json:"size"`
	SizeDerived bool   `json:"size_derived,omitempty"`
	ELFSize     uint64 `json:"elf_size,omitempty"` // st_size, where the symbol table records one
	Module      string `json:"module,omitempty"`
	Source      string `json:"source,omitempty"` // the finder that answered
}

// write prints one symbol. kallsyms is "%0*x %c %s" plus "\t[module]" as
// /proc/kallsyms prints it; system.map is the same without modules' suffix
// (System.map has no module symbols, so they keep the suffix there too).
func (sw *symbolWriter) write(s symfinder.Symbol) error {
	// Format straight into the writer's free buffer space; Write then
	// only advances it (or, for a line that does not fit, flushes).
	b := sw.w.AvailableBuffer()
	switch sw.format {
	case "kallsyms", "system.map":
		b = appendHex(b, s.Addr, sw.digits)
		b = append(b, ' ', byte(s.Kind), ' ')
		b = append(b, s.Name...)
		if s.Module != "" {
			b = append(b, "\t["...)
			b = append(b, s.Module...)
			b = append(b, ']')
		}
		b = append(b, '\n')
	case "csv":
		if !sw.started {
			b = append(b, "addr,type,name,size,size_derived,module\n"...)
		}
		b = appendHex(b, s.Addr, sw.digits)
		b = append(b, ',', byte(s.Kind), ',')
		b = appendCSV(b, s.Name)
		b = append(b, ',')
		b = strconv.AppendUint(b, s.Size, 10)
		b = append(b, ',')
		b = strconv.AppendBool(b, s.SizeDerived)
		b = append(b, ',')
		b = appendCSV(b, s.Module)
		b = append(b, '\n')
	case "json":
		j, err := json.Marshal(jsonSymbol{
			Addr: string(appendHex(nil, s.Addr, sw.digits)), Type: s.Kind.String(), Name: s.Name,
			Size: s.Size, SizeDerived: s.SizeDerived, ELFSize: s.ELFSize, Module: s.Module, Source: s.Finder,
		})
		if err != nil {
			return err
		}
		b = append(append(b, j...), '\n')
	}
	sw.started = true
	_, err := sw.w.Write(b)
	return err
}

func appendCSV(b []byte, s string) []byte {
	needQuote := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == '"' || c == '\n' || c == '\r' {
			needQuote = true
			break
		}
	}
	if !needQuote {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func (sw *symbolWriter) flush() error { return sw.w.Flush() }
