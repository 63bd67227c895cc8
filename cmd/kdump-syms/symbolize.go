package main

import (
	"bufio"
	"io"
	"strconv"

	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// lookuper resolves one address; *symfinder.Chain implements it.
type lookuper interface {
	Lookup(addr uint64) (symfinder.Symbol, error)
}

// symbolizeText copies r to w, appending " name+0xoff/0xsize [module]" after
// every token that reads as a kernel address (digits hex digits, optionally
// 0x-prefixed, not part of a longer word) and resolves to a symbol — the
// frames of an oops ("[<ffffffffc0a1b2c4>]"), register lines ("RIP:
// 0010:ffffffff8110a2b4", "RAX: ffffffff81e0a3c0"), or a bare list. A frame
// written as "[<addr>]" gets the symbol after the closing "]". Everything
// else is left as it was. It returns how many addresses resolved and how
// many looked like addresses but did not.
func symbolizeText(r io.Reader, w io.Writer, l lookuper, digits int, minAddr uint64) (resolved, unresolved int, err error) {
	br := bufio.NewReader(r)
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for {
		line, rerr := br.ReadString('\n')
		if len(line) > 0 {
			out, res, unres := symbolizeLine(line, l, digits, minAddr)
			resolved += res
			unresolved += unres
			if _, werr := bw.WriteString(out); werr != nil {
				return resolved, unresolved, werr
			}
		}
		if rerr == io.EOF {
			return resolved, unresolved, bw.Flush()
		}
		if rerr != nil {
			return resolved, unresolved, rerr
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isWord(c byte) bool { return isHex(c) || c == '_' || 'g' <= c && c <= 'z' || 'G' <= c && c <= 'Z' }

func symbolizeLine(line string, l lookuper, digits int, minAddr uint64) (string, int, int) {
	var out []byte
	resolved, unresolved := 0, 0
	last := 0
	for i := 0; i < len(line); {
		if !isHex(line[i]) || (i > 0 && isWord(line[i-1]) && !(i >= 2 && line[i-2:i] == "0x")) {
			i++
			continue
		}
		j := i
		for j < len(line) && isHex(line[j]) {
			j++
		}
		// A token of exactly `digits` hex digits, not glued to a word.
		if j-i != digits || (j < len(line) && isWord(line[j])) {
			i = j
			continue
		}
		addr, perr := strconv.ParseUint(line[i:j], 16, 64)
		if perr != nil || addr < minAddr {
			i = j
			continue
		}
		end := j
		if end+1 < len(line) && line[end] == '>' && line[end+1] == ']' {
			end += 2
		}
		sym, err := l.Lookup(addr)
		if err != nil {
			unresolved++
			i = j
			continue
		}
		resolved++
		out = append(out, line[last:end]...)
		out = append(out, ' ')
		out = append(out, sym.Format(addr)...)
		last, i = end, end
	}
	if out == nil {
		return line, resolved, unresolved
	}
	return string(append(out, line[last:]...)), resolved, unresolved
}
