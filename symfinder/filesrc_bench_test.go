package symfinder

import (
	"bytes"
	"fmt"
	"testing"
)

// syntheticKallsyms makes a /proc/kallsyms of n lines: a few absolute
// per-CPU symbols, vmlinux text and data, then modules of 200 symbols.
func syntheticKallsyms(n int) []byte {
	var buf bytes.Buffer
	mods := n / 20
	for i := 0; i < 16; i++ {
		fmt.Fprintf(&buf, "%016x A percpu_var_%d\n", i*0x1000, i)
	}
	for i := 0; i < n-16-mods; i++ {
		kind := "Tt"[i%2]
		fmt.Fprintf(&buf, "%016x %c some_kernel_function_%d\n", 0xffffffff81000000+uint64(i)*0x40, kind, i)
	}
	for i := 0; i < mods; i++ {
		fmt.Fprintf(&buf, "%016x t module_function_%d\t[mod%d]\n", 0xffffffffc0000000+uint64(i)*0x40, i, i/200)
	}
	return buf.Bytes()
}

func BenchmarkParseKallsyms(b *testing.B) {
	for _, n := range []int{1000, 200000} {
		text := syntheticKallsyms(n)
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseKallsyms(bytes.NewReader(text), "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseSystemMap(b *testing.B) {
	text := syntheticKallsyms(200000)
	text = text[:bytes.Index(text, []byte("\t["))]
	text = text[:bytes.LastIndexByte(text, '\n')+1]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSystemMap(bytes.NewReader(text), "m", 0x2c000000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSymbolFileLookup(b *testing.B) {
	f, err := ParseKallsyms(bytes.NewReader(syntheticKallsyms(200000)), "k")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		_ = f.Find(Query{Kind: ByAddr, Addr: 0xffffffff81000000 + (i*7919%190000)*0x40 + 3}, func(Symbol) bool { return false })
		i++
	}
}
