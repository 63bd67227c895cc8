package main

import (
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
)

// examples holds one example per command, printed by "COMMAND --help";
// its keys are also the commands "did you mean" knows. A new command adds
// its own.
var examples = map[string]string{
	"all":     "kdump-syms all vmcore > kallsyms.txt",
	"addr":    "kdump-syms addr vmcore ffffffff81a2b3c4; kdump-syms addr vmcore - < oops.txt",
	"name":    "kdump-syms name --glob vmcore 'tcp_v4_*'",
	"info":    "kdump-syms info vmcore",
	"modules": "kdump-syms modules vmcore",
	"ps":      "kdump-syms ps vmcore; kdump-syms ps --format json vmcore",
	"bt":      "kdump-syms bt --state D vmcore; kdump-syms bt vmcore 1 152",
	"extract": "kdump-syms extract -o small.elf vmcore",
	"export":  "kdump-syms export --format elf -o syms vmcore; gdb -ex 'symbol-file syms/vmlinux.syms' -ex 'add-symbol-file syms/xfs.ko.syms'; kdump-syms export --format isf -o isf/linux/k.json image.lime; vol -s isf -f image.lime linux.pslist",
}

// suggest returns the known command nearest to cmd (see nearest), or "".
func suggest(cmd string) string {
	return nearest(cmd, append(slices.Sorted(maps.Keys(examples)), "help", "version"))
}

// nearest returns the name nearest to word (at most two edits away, or one
// of which word is a prefix), the first of equals, or "".
func nearest(word string, names []string) string {
	best, bestD := "", 3
	for _, c := range names {
		d := editDistance(word, c)
		if len(word) >= 2 && strings.HasPrefix(c, word) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// printVersion prints the module version and the VCS revision recorded in
// the binary's build info.
func printVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(w, "kdump-syms (no build info)")
		return
	}
	fmt.Fprintln(w, versionLine(bi))
}

func versionLine(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	line := "kdump-syms " + v
	if rev != "" {
		line += " revision " + rev + dirty
		if when != "" {
			line += " (" + when + ")"
		}
	}
	return line + " " + bi.GoVersion
}
