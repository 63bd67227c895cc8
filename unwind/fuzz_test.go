package unwind

import (
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/kdumpsyms/kdumpsyms/memory"
)

// FuzzFramePointer edits a well-formed stack of frame records: every walk
// (frame records at fp and, riscv64's, below it; s390x's back chain)
// ends, within MaxFrames, with a reason, whatever the stack holds.
func FuzzFramePointer(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0x10, 8, 0x00, 0x01, 0x01, 0x08, 0x00, 0x80, 0xff, 0xff}) // a loop
	base := make([]byte, 16<<10)
	m := testutil.NewSparseMemory()
	for i := range 20 {
		fp := stack + uint64(i)*0x100
		m.PutU64(fp, fp+0x100)
		m.PutU64(fp+8, text+uint64(i)*0x10)
	}
	m.PutU64(stack+19*0x100, 0)
	for a := uint64(0); a < uint64(len(base)); a += 4096 {
		if p := m.Pages[stack+a]; p != nil {
			copy(base[a:], p)
		}
	}
	f.Fuzz(func(t *testing.T, edits []byte) {
		img := testutil.FuzzPatch(base, edits)
		mem := testutil.NewSparseMemory()
		mem.Write(stack, img)
		// riscv64's layout (records below s0, the leaf rule with an RA)
		// reads the same image 16 bytes lower; return addresses 4 to 7 are
		// into its trap entry, whose frames are read as struct pt_regs.
		riscv := func(r memory.Reader, pc, fp uint64, opt Options) ([]Frame, Stop) {
			opt.RecordBelow, opt.RA = true, text+0x1234
			opt.ExceptionEntry = Range{Start: text + 0x40, End: text + 0x80}
			return FramePointer(r, pc, fp+16, opt)
		}
		for _, walk := range []func(memory.Reader, uint64, uint64, Options) ([]Frame, Stop){FramePointer, BackChainS390, BackChainPPC64, riscv} {
			fr, stop := walk(mem, text, stack, Options{Target: le64, KernelStart: text, MaxFrames: 64})
			if len(fr) > 64 || len(fr) == 0 {
				t.Fatalf("%d frames", len(fr))
			}
			if !stop.Final && stop.Err == nil {
				t.Fatal("stop without a reason")
			}
		}
	})
}

// FuzzORC edits well-formed ORC tables and the stack they describe
// (image: 4 KiB of ip table and entries, then 4 KiB of stack): the walk
// ends within MaxFrames with a reason. The last two walks start at the
// undefined terminator, with and without the function's bounds, so they
// take the recovery path (recover.go): a recovered frame is only ever the
// second, and comes with how it was found.
func FuzzORC(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x00, 0x04, 4, 0xff, 0xff, 0xff, 0x7f})                            // an ip slot
	f.Add([]byte{0, 0x20, 0x00, 0x00, 8, 0x0c, 0x01, 0x00, 0x81, 0xff, 0xff, 0xff, 0xff}) // a stack word: a return address
	fns := []orcFn{
		{addr: kText, kind: kindRegs, spReg: orcRegSP},
		{addr: kText + 0x100, kind: kindCall, spReg: orcRegSP, spOff: 8},
		{addr: kText + 0x200, kind: kindCall, spReg: orcRegSP, spOff: 16, bpReg: orcRegPrevSP, bpOff: -16},
		{addr: kText + 0x300, kind: kindIret, spReg: orcRegSP, spOff: 0},
		{addr: kText + 0x400, kind: kindUndefined},
	}
	m := testutil.NewSparseMemory()
	tabs := orcWorld(m, fns, ORC64)
	sp := kStack
	for i := uint64(0); i < 512; i++ { // a stack of return addresses
		m.PutU64(sp+8*i, kText+0x110+(i%3)*0x100)
	}
	base := make([]byte, 3*4096)
	copy(base, m.Pages[orcIP])
	copy(base[4096:], m.Pages[orcTab])
	copy(base[8192:], m.Pages[kStack])
	f.Fuzz(func(t *testing.T, edits []byte) {
		img := testutil.FuzzPatch(base, edits)
		mem := testutil.NewSparseMemory()
		mem.Write(orcIP, img[:min(len(img), 4096)])
		if len(img) > 4096 {
			mem.Write(orcTab, img[4096:min(len(img), 8192)])
		}
		if len(img) > 8192 {
			mem.Write(kStack, img[8192:])
		}
		// The same tables also serve as a module's, over part of the text,
		// with a num_orcs taken from the edits.
		nMod := uint64(5)
		if len(edits) > 0 {
			nMod = uint64(edits[0]) * 997
		}
		mod := []ORCModule{{Name: "m", Start: kText + 0x100, End: kText + 0x380, IP: orcIP, Entries: orcTab, N: nMod}}
		for i, format := range []ORCFormat{ORCBefore63, ORC64, ORC71, ORC64, ORC64, ORC64} {
			tabs.Format, tabs.Modules, tabs.Func = format, nil, nil
			cpu := make([]uint64, 27)
			cpu[regIP], cpu[regSP] = kText+0x210, sp
			switch i {
			case 3:
				tabs.Modules = mod
			case 4:
				tabs.Func = func(a uint64) (uint64, uint64, bool) { return kText + 0x300, kText + 0x480, true }
				fallthrough
			case 5:
				cpu[regIP], cpu[regSP] = kText+0x400, sp+8*uint64(len(edits)%64)
			}
			fr, stop := ORC(mem, cpu, tabs, Options{KernelStart: kText, MaxFrames: 64})
			if len(fr) > 64 || len(fr) == 0 {
				t.Fatalf("%d frames", len(fr))
			}
			if !stop.Final && stop.Err == nil {
				t.Fatal("stop without a reason")
			}
			for j, f := range fr {
				if f.Recovered != nil && (j != 1 || f.Recovered.String() == "") {
					t.Fatalf("frame %d recovered: %v", j, f.Recovered)
				}
			}
		}
	})
}

// FuzzARM edits well-formed ARM unwind tables and the stack they describe
// (image: 4 KiB of vmlinux index, 4 KiB of .ARM.extab, 4 KiB of stack; the
// module's index is the vmlinux one): the walk ends within MaxFrames
// with a reason, whatever the index entries, opcodes and stack hold.
func FuzzARM(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 4, 0xff, 0xff, 0xff, 0x7f})             // a prel31 out of the image
	f.Add([]byte{0, 0x10, 0x04, 0x81, 0xff, 0xb2, 0xff, 0xff}) // an extab entry with 255 words
	m := testutil.NewSparseMemory()
	tabs := armKernel(m)
	sp := uint64(aStack + 0x100)
	for i := uint64(0); i < 256; i++ { // return addresses into every function
		m.PutU32(sp+4*i, uint32(aText+0x104+(i%5)*0x100))
	}
	base := make([]byte, 3*4096)
	copy(base, m.Pages[aIdx])
	copy(base[4096:], m.Pages[aTab])
	copy(base[8192:], m.Pages[aStack])
	f.Fuzz(func(t *testing.T, edits []byte) {
		img := testutil.FuzzPatch(base, edits)
		mem := testutil.NewSparseMemory()
		mem.Write(aIdx, img[:min(len(img), 4096)])
		if len(img) > 4096 {
			mem.Write(aTab, img[4096:min(len(img), 8192)])
		}
		if len(img) > 8192 {
			mem.Write(aStack, img[8192:])
		}
		tb := tabs
		tb.Vmlinux.Stop = aIdx + 8*uint64(6+len(edits)%500)
		tb.LoadModules = func() ([]ARMIndex, error) {
			return []ARMIndex{{Name: "m", Start: aIdx, Stop: tb.Vmlinux.Stop, TextStart: aMod, TextEnd: aMod + 0x1000}}, nil
		}
		for _, pc := range []uint64{aText + 0x10, aText + 0x200, aMod + 0x20, 0xffff0018} {
			regs := armRegs(pc, sp, aText+0x310)
			if pc == 0xffff0018 {
				regs[armCPSR] = 0x1d2
			}
			fr, stop := ARM(mem, regs, tb, Options{Target: le32, KernelStart: 0xbf000000, StackSize: 8 << 10, MaxFrames: 64})
			if len(fr) > 64 || len(fr) == 0 {
				t.Fatalf("%d frames", len(fr))
			}
			if !stop.Final && stop.Err == nil {
				t.Fatal("stop without a reason")
			}
		}
	})
}
