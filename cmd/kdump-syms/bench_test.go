package main

import (
	"io"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// benchCLI runs a command on each corpus guest's zlib kdump files (the
// issue's benchmark dumps), end to end: open, decode, print to io.Discard.
func benchCLI(b *testing.B, args ...string) {
	ran := false
	for _, g := range testutil.Corpus(b) {
		for _, f := range []testutil.DumpFormat{testutil.DumpZlib, testutil.DumpQEMUKdumpZlib} {
			paths, ok := g.DumpPaths(f)
			if !ok {
				continue
			}
			argv := append([]string{args[0], paths[0]}, args[1:]...)
			if code := run(argv, nil, io.Discard, io.Discard); code != exitOK {
				continue // e.g. an extract without the kernel log
			}
			ran = true
			b.Run(g.Name+"/"+string(f), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if code := run(argv, nil, io.Discard, io.Discard); code != exitOK {
						b.Fatalf("exit %d", code)
					}
				}
			})
		}
	}
	if !ran {
		b.Skip("no corpus zlib kdump on which the command succeeds")
	}
}

// BenchmarkDmesg: the target is 20 ms on the largest corpus dump's
// zlib kdump file.
func BenchmarkDmesg(b *testing.B) { benchCLI(b, "dmesg") }

// BenchmarkInfoNoSymbols is a triage script's first call: release and
// build ID, no symbols decoded. The target is 5 ms.
func BenchmarkInfoNoSymbols(b *testing.B) { benchCLI(b, "info", "--format", "json", "--no-symbols") }

// BenchmarkPanic: the report, every CPU's registers and unwound stack,
// symbolized. The target is 60 ms.
func BenchmarkPanic(b *testing.B) { benchCLI(b, "panic") }

// BenchmarkPs: every task, end to end. The target is 30 ms for
// about 100 tasks on the largest corpus dump's zlib kdump file.
func BenchmarkPs(b *testing.B) { benchCLI(b, "ps") }

// BenchmarkBt: every task's stack, end to end. The target is 150
// ms for about 100 tasks on the largest corpus dump's zlib kdump file.
func BenchmarkBt(b *testing.B) { benchCLI(b, "bt", "--all") }

// BenchmarkAll is `kdump-syms all` end to end on every container of the
// largest corpus kernel: the command bench/drgn-paired times against drgn
// (with KDUMP_SYMS_CORPUS, on the full dumps).
func BenchmarkAll(b *testing.B) {
	g := testutil.CorpusGuestNamed(b, testutil.ShortGuest)
	ran := false
	for _, f := range g.AvailableDumps() {
		paths, _ := g.DumpPaths(f)
		argv := append([]string{"all"}, paths...)
		ran = true
		b.Run(string(f), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if code := run(argv, nil, io.Discard, io.Discard); code != exitOK {
					b.Fatalf("exit %d", code)
				}
			}
		})
	}
	if !ran {
		b.Skip("no dump of " + testutil.ShortGuest)
	}
}
