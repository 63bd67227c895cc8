package coderef

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func le32(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

func TestARM64(t *testing.T) {
	const pc = 0xffff800008010004
	// adrp x1, page+0x12345000 (imm21 0x12345: immlo 1, immhi 0x48d1)
	adrp := uint32(0x90000000 | 1<<29 | 0x48d1<<5 | 1)
	page := uint64(pc&^0xfff + 0x12345000)
	code := le32(
		adrp,
		0x91000000|0x678<<10|1<<5|1,   // add x1, x1, #0x678 (section anchor)
		0x91000000|0x10<<10|1<<5|3,    // add x3, x1, #0x10
		0xf9400000|2<<10|1<<5|2,       // ldr x2, [x1, #16]
		0xa9400000|2<<15|1<<5|4|5<<10, // ldp x4, x5, [x1, #16]
		0xd503201f,                    // nop
		0xf9400000|0<<10|2<<5|6,       // ldr x6, [x2]: x2 was loaded, not known
	)
	got, err := Refs("arm64", pc, code)
	require.NoError(t, err)
	want := []uint64{page, page + 0x678, page + 0x678 + 0x10}
	require.Equal(t, want, got)

	// A negative ADRP: imm21 = -1 (all ones) is the page before.
	neg := uint32(0x90000000 | 3<<29 | 0x7ffff<<5)
	got, err = Refs("arm64", pc, le32(neg))
	require.NoError(t, err)
	require.Equal(t, []uint64{pc&^0xfff - 0x1000}, got)
}

func TestPPC64(t *testing.T) {
	const pc = 0xc0000000002d5f00
	const toc = pc + 0x11f5<<16 + 0x5200
	d := func(op, rd, ra uint32, imm int16) uint32 { return op<<26 | rd<<21 | ra<<16 | uint32(uint16(imm)) }
	words := []uint32{
		d(15, 2, 12, 0x11f5), // addis r2, r12, 0x11f5   (global entry)
		d(14, 2, 2, 0x5200),  // addi r2, r2, 0x5200: r2 = toc
		0x7c0802a6,           // mflr r0
		d(15, 9, 2, 0x112),   // addis r9, r2, 0x112
		d(14, 3, 9, -0x7000), // addi r3, r9, -0x7000
		d(58, 4, 9, 0x10),    // ld r4, 0x10(r9)
		d(58, 5, 4, 8),       // ld r5, 8(r4): r4 was loaded, unknown
		d(36, 5, 3, 4),       // stw r5, 4(r3)
		d(58, 9, 1, -32),     // ld r9, -32(r1): an epilogue's restore
		d(14, 6, 9, 0x148),   // addi r6, r9, 0x148: r9 is still taken as known
	}
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		code := make([]byte, 4*len(words))
		for i, w := range words {
			bo.PutUint32(code[4*i:], w)
		}
		arch := map[bool]string{true: "ppc64le", false: "ppc64"}[bo == binary.ByteOrder(binary.LittleEndian)]
		got, err := Refs(arch, pc, code)
		require.NoError(t, err)
		hi := uint64(toc + 0x112<<16)
		require.Equal(t, []uint64{toc, hi - 0x7000, hi - 0x7000 + 4, hi + 0x10, hi + 0x148}, got, arch)
	}
}

func TestARM(t *testing.T) {
	const pc = 0xc0562ecc
	// ARM mode: movw r3, #0x86b8; movt r3, #0xc1a9; ldr r0, [pc, #0]; bx lr;
	// a literal pool word 0xc1b00010.
	code := le32(0xe30836b8, 0xe34c31a9, 0xe59f0000, 0xe12fff1e, 0xc1b00010)
	got, err := Refs("arm", pc, code)
	require.NoError(t, err)
	require.Contains(t, got, uint64(0xc1a986b8)) // the pair
	require.Contains(t, got, uint64(0xc1b00010)) // the literal
	require.Contains(t, got, uint64(0xe30836b8)) // every word is a candidate
	// Section anchors, as Debian's 6.12 ftrace_mod_get_kallsym reaches
	// ftrace_mod_maps: movw/movt r6, anchor; mov ip, r6;
	// ldr r4, [ip, #0x114]!; then ldr r3, [pc, #8] (the literal four words
	// on: pc+8+8) and ldrh r2, [r3, #-2]; a bl forgets r3.
	anchor := le32(0xe3046038, 0xe34c61aa, 0xe1a0c006, 0xe5bc4114,
		0xe59f3008, 0xe15320b2, 0xeb000000, 0xe5932008, 0xc1b00010)
	got, err = Refs("arm", pc, anchor)
	require.NoError(t, err)
	require.Contains(t, got, uint64(0xc1aa4038))
	require.Contains(t, got, uint64(0xc1aa4038+0x114))
	require.Contains(t, got, uint64(0xc1b00010-2))
	require.NotContains(t, got, uint64(0xc1b00010+8))
	// A MOVT on another register than the MOVW's builds nothing.
	got, err = Refs("arm", pc, le32(0xe30836b8, 0xe34c41a9))
	require.NoError(t, err)
	require.Equal(t, []uint64{0xe30836b8, 0xe34c41a9}, got)
	// Thumb-2: movw r2, #0x86b8 (f248 62b8); movt r2, #0xc1a9 (f2cc 12a9),
	// after a 16-bit nop (bf00) so the pair is only halfword aligned.
	thumb := []byte{0x00, 0xbf, 0x48, 0xf2, 0xb8, 0x62, 0xcc, 0xf2, 0xa9, 0x12}
	got, err = Refs("arm", pc, thumb)
	require.NoError(t, err)
	require.Contains(t, got, uint64(0xc1a986b8))
	// An unaligned pc: the scan of words starts at the first aligned one.
	got, err = Refs("arm", pc+2, []byte{0xff, 0xff, 0x10, 0x00, 0xb0, 0xc1})
	require.NoError(t, err)
	require.Equal(t, []uint64{0xc1b00010}, got)
}

func TestI386(t *testing.T) {
	// mov $0xc9a01234, %eax ; cmp $0xc9a01234, %edx
	code := []byte{0xb8, 0x34, 0x12, 0xa0, 0xc9, 0x81, 0xfa, 0x34, 0x12, 0xa0, 0xc9}
	got, err := Refs("i386", 0xc9000000, code)
	require.NoError(t, err)
	require.Contains(t, got, uint64(0xc9a01234))
	require.Len(t, got, len(code)-3-1) // every window, one duplicate folded
}

func TestX86_64(t *testing.T) {
	const pc = 0xffffffff81000000
	// mov $0xffffffff82a01234, %rdi (48 c7 c7 imm32, sign-extended)
	abs := []byte{0x48, 0xc7, 0xc7, 0x34, 0x12, 0xa0, 0x82}
	// lea 0x1000(%rip), %rsi (48 8d 35 disp32) at pc+7: target pc+14+0x1000
	rip := []byte{0x48, 0x8d, 0x35, 0x00, 0x10, 0x00, 0x00}
	got, err := Refs("x86_64", pc, append(abs, rip...))
	require.NoError(t, err)
	require.Contains(t, got, uint64(0xffffffff82a01234))
	require.Contains(t, got, uint64(pc+14+0x1000))
}

func TestS390X(t *testing.T) {
	const pc = 0x3ffe0000000
	// larl %r2, +0x100 halfwords at pc+2 (after a 2-byte nopr): c0 20 00000100
	code := []byte{0x07, 0x00, 0xc0, 0x20, 0x00, 0x00, 0x01, 0x00}
	got, err := Refs("s390x", pc, code)
	require.NoError(t, err)
	require.Equal(t, []uint64{pc + 2 + 0x200}, got)
	// lgrl %r1, -2 halfwords: c4 18 fffffffe
	got, err = Refs("s390x", pc, []byte{0xc4, 0x18, 0xff, 0xff, 0xff, 0xfe})
	require.NoError(t, err)
	require.Equal(t, []uint64{pc - 4}, got)
}

func TestUnsupported(t *testing.T) {
	_, err := Refs("mips", 0, []byte{1, 2, 3, 4})
	require.True(t, errors.Is(err, errors.ErrUnsupported))
	require.False(t, Supported("mips"))
	require.True(t, Supported("riscv64"))
	require.True(t, Supported("ppc64le"))
	require.True(t, Supported("arm64"))
	require.True(t, Supported("arm"))
}

func FuzzRefs(f *testing.F) {
	f.Add("arm64", uint64(0xffff800008010004), le32(0x90000000|1<<29|0x48d1<<5|1, 0x91000000|0x678<<10|1<<5|1))
	f.Add("x86_64", uint64(0xffffffff81000000), []byte{0x48, 0xc7, 0xc7, 0x34, 0x12, 0xa0, 0x82})
	f.Add("ppc64le", uint64(0xc0000000002d5f00), le32(0x3c4c11f5, 0x38425200, 0x3d220112, 0x38699000))
	f.Add("i386", uint64(0xc9000000), []byte{0xb8, 0x34, 0x12, 0xa0, 0xc9})
	f.Add("s390x", uint64(0x3ffe0000000), []byte{0xc0, 0x20, 0x00, 0x00, 0x01, 0x00})
	f.Add("arm", uint64(0xc0562ecc), le32(0xe30836b8, 0xe34c31a9, 0xf248f2cc))
	f.Fuzz(func(t *testing.T, arch string, pc uint64, code []byte) {
		got, err := Refs(arch, pc, code)
		if err != nil {
			require.Nil(t, got)
			return
		}
		// At most five candidates per byte (x86_64), sorted, unique.
		require.LessOrEqual(t, len(got), 5*len(code))
		for i := 1; i < len(got); i++ {
			require.Less(t, got[i-1], got[i])
		}
	})
}

func TestRISCV64(t *testing.T) {
	const pc = 0xffffffff80100000
	base := uint64(pc + 0x12345000)
	code := le32(
		0x12345<<12|15<<7|0x17,           // auipc a5, 0x12345
		0x678<<20|15<<15|15<<7|0x13,      // addi a5, a5, 0x678
		16<<20|15<<15|3<<12|14<<7|0x03,   // ld a4, 16(a5)
		24<<7|3<<12|15<<15|0x23,          // sd zero, 24(a5)
		0xff8<<20|15<<15|12<<7|0x13,      // addi a2, a5, -8
		0<<20|14<<15|3<<12|11<<7|0x03,    // ld a1, 0(a4): a4 was loaded, not known
		0x1000<<12|15<<7|0x37,            // lui a5, 0x1000: absolute
		0x10<<20|15<<15|3<<12|10<<7|0x03, // ld a0, 16(a5)
	)
	// c.ld a3, 8(a2) (rs1' = a2, rd' = a3), then c.addi a2, -4 and
	// c.mv a5, a2; sd zero, 0(a5)
	cLd := uint16(3<<13 | 1<<10 | 4<<7 | 5<<2) // c.ld a3, 8(a2)
	code = append(code, byte(cLd), byte(cLd>>8))
	cAddi := uint16(0<<13 | 1<<12 | 12<<7 | 0x1c<<2 | 1) // c.addi a2, -4
	cMv := uint16(4<<13 | 15<<7 | 12<<2 | 2)             // c.mv a5, a2
	code = append(code, byte(cAddi), byte(cAddi>>8), byte(cMv), byte(cMv>>8))
	code = append(code, le32(3<<12|15<<15|0x23)...) // sd zero, 0(a5)
	got, err := Refs("riscv64", pc, code)
	require.NoError(t, err)
	want := []uint64{0x1000010, base + 0x678 - 8 - 4, base + 0x678 - 8, base + 0x678 - 8 + 8, base + 0x678, base + 0x678 + 16, base + 0x678 + 24}
	slices.Sort(want)
	want = slices.Compact(want)
	require.Equal(t, want, got)
	require.True(t, Supported("riscv64"))
	// A truncated 32-bit instruction at the end is ignored.
	got, err = Refs("riscv64", pc, []byte{0x97, 0x57})
	require.NoError(t, err)
	require.Empty(t, got)
}
