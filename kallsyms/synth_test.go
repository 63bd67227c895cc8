package kallsyms

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// memMap is one mapped range of kernel virtual memory; reads outside fault.
type memMap struct {
	base uint64
	data []byte
}

func (m *memMap) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < m.base || addr-m.base >= uint64(len(m.data)) {
		return 0, memory.Fault(addr, "kernel virtual", "", memory.ErrNotSaved)
	}
	n := copy(p, m.data[addr-m.base:])
	if n < len(p) {
		return n, memory.Fault(addr+uint64(n), "kernel virtual", "", memory.ErrNotSaved)
	}
	return n, nil
}

type sym struct {
	addr   uint64
	kind   byte
	name   string
	percpu bool
}

// gen describes one kernel generation's table format, the way
// scripts/kallsyms emits it.
type gen struct {
	name  string
	bo    binary.ByteOrder
	ptr   int
	algn  int    // label alignment
	order string // "v4.6", "v6.2", "v6.4"
	enc   Encoding
	big   bool // two-byte length prefixes; adds a big symbol
	msz   int  // marker and num_syms width: 4, or ptr before v4.20
	rel   string
}

var gens = []gen{
	{name: "5.10-x86_64", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v4.6", enc: AbsolutePercpu, msz: 4, rel: "5.10.0-32-amd64"},
	{name: "6.1-arm64-seqs", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v6.2", enc: BaseRelative, big: true, msz: 4, rel: "6.1.0-57-arm64"},
	{name: "6.1-i386-seqs", bo: binary.LittleEndian, ptr: 4, algn: 4, order: "v6.2", enc: BaseRelative, big: true, msz: 4, rel: "6.1.0-50-686"},
	{name: "6.1-s390x-be", bo: binary.BigEndian, ptr: 8, algn: 8, order: "v6.2", enc: BaseRelative, big: true, msz: 4, rel: "6.1.0-50-s390x"},
	{name: "6.0-mainline", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v4.6", enc: AbsolutePercpu, msz: 4, rel: "6.0.0"},
	{name: "6.12-x86_64", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v6.4", enc: AbsolutePercpu, big: true, msz: 4, rel: "6.12.117+deb13-amd64"},
	{name: "6.16-base-relative", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v6.4", enc: BaseRelative, big: true, msz: 4, rel: "6.16.0"},
	{name: "7.2-place-relative", bo: binary.LittleEndian, ptr: 8, algn: 4, order: "v6.4", enc: PlaceRelative, big: true, msz: 4, rel: "7.2.13+deb14-amd64"},
	{name: "7.0-be-place-relative", bo: binary.BigEndian, ptr: 8, algn: 4, order: "v6.4", enc: PlaceRelative, big: true, msz: 4, rel: "7.0.0"},
	{name: "7.0-i386-nonreloc", bo: binary.LittleEndian, ptr: 4, algn: 4, order: "v6.4", enc: Offsets32, big: true, msz: 4, rel: "7.0.0"},
	{name: "6.8-ia64-absolute", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v6.4", enc: Absolute, big: true, msz: 4, rel: "6.8.0"},
	{name: "4.4-absolute", bo: binary.LittleEndian, ptr: 8, algn: 8, order: "v4.6", enc: Absolute, msz: 8, rel: "4.4.0"},
	{name: "4.14-be-ulong-markers", bo: binary.BigEndian, ptr: 8, algn: 8, order: "v4.6", enc: BaseRelative, msz: 8, rel: "4.14.0"},
	{name: "5.4-i386", bo: binary.LittleEndian, ptr: 4, algn: 4, order: "v4.6", enc: BaseRelative, msz: 4, rel: "5.4.0"},
}

// synth is a synthetic kernel: its symbols, a memory map holding its
// kallsyms tables, and VMCOREINFO with and without the kallsyms lines.
type synth struct {
	g        gen
	syms     []sym
	mem      *memMap
	labels   map[string]uint64
	info     *vmcoreinfo.Info // v6.0+ style, kallsyms lines present
	infoBare *vmcoreinfo.Info // < v6.0 style
	stext    uint64
	tokTab   []byte
	tokIdx   []uint16
	namesOff []int // offset of each entry in names
	names    []byte
}

var wordList = []string{"sys", "acpi", "pci", "dev", "irq", "lock", "init", "exit", "get", "put", "set", "read", "write",
	"ops", "ext4", "xfs", "tcp", "udp", "sock", "page", "mem", "alloc", "free", "task", "sched", "rcu", "timer", "work", "queue",
	"bpf", "net", "dma", "usb", "hid", "kvm", "x86", "cpu", "node", "zone", "slab", "vfs", "inode", "file", "path", "map", "btf"}

// makeSyms returns n kernel-like symbols in address order.
func makeSyms(g gen, n int) []sym {
	var out []sym
	if g.enc == AbsolutePercpu {
		for i := range 40 {
			out = append(out, sym{addr: uint64(i) * 0x40, kind: 'A', name: fmt.Sprintf("per_cpu_var%d", i), percpu: true})
		}
	}
	text := uint64(0xffffffff81000000)
	if g.ptr == 4 {
		text = 0xc1000000
	}
	a := text
	out = append(out, sym{a, 'T', "_text", false}, sym{a, 'T', "startup_64", false}, sym{a, 'T', "_stext", false})
	a += 0x40
	k := 0
	add := func(kind byte, name string) {
		out = append(out, sym{addr: a, kind: kind, name: name})
		a += uint64(16 + (k*37)%200)
		k++
	}
	body := n - len(out) - 12
	for i := 0; i < body; i++ {
		w1, w2, w3 := wordList[i%len(wordList)], wordList[(i/7)%len(wordList)], wordList[(i/53)%len(wordList)]
		name := fmt.Sprintf("%s_%s_%s%d", w1, w2, w3, i%1000)
		kind := byte("TtTtWw"[i%6])
		switch {
		case i == body/2 && g.big:
			// A Rust-like symbol whose encoding needs more than 127 code
			// bytes: characters no multi-byte token covers.
			name = "_RNvMs" + strings.Repeat("Q7Z9", 40)
			kind = 't'
		case i%97 == 0:
			name = "dup_static_fn" // duplicated static names
			kind = 't'
		case i%13 == 0:
			// aliases at the same address
			out = append(out, sym{addr: a, kind: 'T', name: name + "_alias"})
		}
		if i == body*3/5 {
			add('T', "_etext")
			add('r', "init_uts_ns_ro")
			add('T', "_sinittext")
		}
		if i == body*4/5 {
			add('T', "_einittext")
			add('D', "init_uts_ns")
			add('D', "mem_section")
			add('d', "init_top_pgt")
		}
		add(kind, name)
	}
	add('B', "__bss_start")
	add('b', "some_bss")
	add('B', "_end")
	return out
}

// tokenize builds a token table (identity for every character used, multi
// byte tokens in unused slots from 255 down) and encodes every symbol.
func tokenize(syms []sym) (table []byte, index []uint16, enc [][]byte) {
	used := [256]bool{}
	for _, s := range syms {
		used[s.kind] = true
		for i := 0; i < len(s.name); i++ {
			used[s.name[i]] = true
		}
	}
	cand := []string{"Tsys_", "tacpi_", "t__", "_init", "irq", "lock", "_get", "_put", "_set", "sched_", "ext4_", "pci_",
		"dev", "sock", "tcp_", "page", "alloc", "_free", "task", "timer", "work", "queue", "per_cpu_var", "_alias", "dup_static_fn",
		"mem_", "_read", "_write", "node", "zone", "slab", "inode", "file", "path", "Tsys_sys_", "_ops", "TsysT", "acpi_acpi_"}
	tokStr := make([]string, 256)
	ci := 0
	for c := 255; c >= 0; c-- {
		if used[c] {
			tokStr[c] = string(rune(c))
			continue
		}
		if ci < len(cand) {
			tokStr[c] = cand[ci]
			ci++
		} else if c%5 == 0 {
			tokStr[c] = "" // profit ran out: empty slot
		} else {
			tokStr[c] = fmt.Sprintf("zz%dq", c) // never matches a name
		}
	}
	index = make([]uint16, 256)
	for c := range 256 {
		index[c] = uint16(len(table))
		table = append(table, tokStr[c]...)
		table = append(table, 0)
	}
	// Longest tokens first for a greedy encoder.
	var multi []int
	for c := range 256 {
		if len(tokStr[c]) > 1 {
			multi = append(multi, c)
		}
	}
	sort.SliceStable(multi, func(i, j int) bool { return len(tokStr[multi[i]]) > len(tokStr[multi[j]]) })
	// The same candidates in the same order, grouped by first byte: only
	// those can be a prefix.
	var byFirst [256][]int
	for _, c := range multi {
		byFirst[tokStr[c][0]] = append(byFirst[tokStr[c][0]], c)
	}
	for _, s := range syms {
		full := string(s.kind) + s.name
		var codes []byte
		for i := 0; i < len(full); {
			hit := false
			for _, c := range byFirst[full[i]] {
				if strings.HasPrefix(full[i:], tokStr[c]) {
					codes = append(codes, byte(c))
					i += len(tokStr[c])
					hit = true
					break
				}
			}
			if !hit {
				codes = append(codes, full[i])
				i++
			}
		}
		enc = append(enc, codes)
	}
	return table, index, enc
}

func (g gen) textBase() uint64 {
	if g.ptr == 4 {
		return 0xc1000000
	}
	return 0xffffffff81000000
}

// build lays out the tables of syms for generation g in a memory map,
// 2 MiB after the start of text as in a real image.
func build(g gen, syms []sym) *synth { return buildGap(g, syms, 0x200000) }

// buildGap is build with the tables gap bytes after the start of text
// (at least 0x2000, for the banner): the gap is mapped zeros a scan has to
// cross.
func buildGap(g gen, syms []sym, gap uint64) *synth {
	s := &synth{g: g, syms: syms, labels: map[string]uint64{}}
	n := len(syms)
	s.tokTab, s.tokIdx, _ = tokenize(syms)
	_, _, codes := tokenize(syms)
	// names and markers
	var markers []uint64
	for i, c := range codes {
		if i%256 == 0 {
			markers = append(markers, uint64(len(s.names)))
		}
		s.namesOff = append(s.namesOff, len(s.names))
		l := len(c)
		if l > 0x7f {
			if !g.big {
				panic("big symbol without big names")
			}
			s.names = append(s.names, byte(0x80|l&0x7f), byte(l>>7))
		} else {
			s.names = append(s.names, byte(l))
		}
		s.names = append(s.names, c...)
	}
	// seqs_of_names
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	sort.SliceStable(perm, func(a, b int) bool {
		x, y := syms[perm[a]], syms[perm[b]]
		if x.name != y.name {
			return x.name < y.name
		}
		return x.addr < y.addr
	})
	var seqs []byte
	for _, p := range perm {
		seqs = append(seqs, byte(p>>16), byte(p>>8), byte(p))
	}
	text := g.textBase()
	rodata := text + gap
	var img []byte
	put := func(label string, b []byte) uint64 {
		for len(img)%g.algn != 0 {
			img = append(img, 0)
		}
		a := rodata + uint64(len(img))
		s.labels[label] = a
		img = append(img, b...)
		return a
	}
	word := func(v uint64, w int) []byte {
		b := make([]byte, w)
		if w == 8 {
			g.bo.PutUint64(b, v)
		} else {
			g.bo.PutUint32(b, uint32(v))
		}
		return b
	}
	var markerBytes []byte
	for _, m := range markers {
		markerBytes = append(markerBytes, word(m, g.msz)...)
	}
	idxBytes := make([]byte, 512)
	for i, v := range s.tokIdx {
		g.bo.PutUint16(idxBytes[2*i:], v)
	}
	// Address table; place-relative needs its own address, known once
	// the preceding labels are placed.
	var base uint64
	for _, y := range syms {
		if !y.percpu {
			base = y.addr
			break
		}
	}
	if g.enc == BaseRelative {
		base = syms[0].addr
	}
	addrTable := func(at uint64) []byte {
		var b []byte
		for i, y := range syms {
			switch g.enc {
			case Absolute:
				b = append(b, word(y.addr, g.ptr)...)
			case BaseRelative:
				b = append(b, word(y.addr-base, 4)...)
			case AbsolutePercpu:
				if y.percpu {
					b = append(b, word(y.addr, 4)...)
				} else {
					b = append(b, word(uint64(uint32(int32(int64(base)-int64(y.addr)-1))), 4)...)
				}
			case PlaceRelative:
				b = append(b, word(uint64(uint32(int32(int64(y.addr-(at+4*uint64(i)))))), 4)...)
			case Offsets32:
				b = append(b, word(y.addr, 4)...)
			}
		}
		return b
	}
	width := 4
	if g.enc == Absolute {
		width = g.ptr
	}
	rel := g.enc == BaseRelative || g.enc == AbsolutePercpu
	emitAddrs := func() {
		for len(img)%g.algn != 0 {
			img = append(img, 0)
		}
		at := rodata + uint64(len(img))
		put(map[bool]string{true: "kallsyms_addresses", false: "kallsyms_offsets"}[g.enc == Absolute], addrTable(at))
		_ = width
		if rel {
			put("kallsyms_relative_base", word(base, g.ptr))
		}
	}
	switch g.order {
	case "v4.6", "v6.2":
		emitAddrs()
		put("kallsyms_num_syms", word(uint64(n), g.msz))
		put("kallsyms_names", s.names)
		put("kallsyms_markers", markerBytes)
		if g.order == "v6.2" {
			put("kallsyms_seqs_of_names", seqs)
		}
		put("kallsyms_token_table", s.tokTab)
		put("kallsyms_token_index", idxBytes)
	case "v6.4":
		put("kallsyms_num_syms", word(uint64(n), g.msz))
		put("kallsyms_names", s.names)
		put("kallsyms_markers", markerBytes)
		put("kallsyms_token_table", s.tokTab)
		put("kallsyms_token_index", idxBytes)
		emitAddrs()
		put("kallsyms_seqs_of_names", seqs)
	}
	for len(img)%4096 != 0 {
		img = append(img, 0)
	}
	// The image: text (zeros plus a banner) then the tables.
	pre := make([]byte, rodata-text)
	copy(pre[0x1000:], "Linux version "+g.rel+" 0123456789 0\x001\x002\x00 not a table")
	s.mem = &memMap{base: text, data: append(pre, img...)}
	for _, y := range syms {
		if y.name == "_stext" {
			s.stext = y.addr
		}
	}
	var vi bytes.Buffer
	fmt.Fprintf(&vi, "OSRELEASE=%s\nPAGESIZE=4096\n", g.rel)
	fmt.Fprintf(&vi, "SYMBOL(_stext)=%x\n", s.stext)
	for _, y := range syms {
		switch y.name {
		case "init_uts_ns", "init_top_pgt":
			fmt.Fprintf(&vi, "SYMBOL(%s)=%x\n", y.name, y.addr)
		case "mem_section":
			fmt.Fprintf(&vi, "SYMBOL(%s)=%x\n", y.name, y.addr+0x123456) // a pointer's value
		}
	}
	bare := vi.String()
	for _, l := range []string{"kallsyms_names", "kallsyms_num_syms", "kallsyms_token_table", "kallsyms_token_index", "kallsyms_offsets", "kallsyms_relative_base", "kallsyms_addresses"} {
		if a, ok := s.labels[l]; ok {
			fmt.Fprintf(&vi, "SYMBOL(%s)=%x\n", l, a)
		}
	}
	var err error
	if s.info, err = vmcoreinfo.Parse(vi.Bytes()); err != nil {
		panic(err)
	}
	if s.infoBare, err = vmcoreinfo.Parse([]byte(bare)); err != nil {
		panic(err)
	}
	return s
}

// procKallsyms formats syms as the vmlinux part of /proc/kallsyms.
func procKallsyms(syms []sym, ptr int) string {
	var b strings.Builder
	for _, y := range syms {
		fmt.Fprintf(&b, "%0*x %c %s\n", 2*ptr, y.addr, y.kind, y.name)
	}
	return b.String()
}
