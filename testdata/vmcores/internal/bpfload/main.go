// Command bpfload runs inside the corpus guests (static, no cgo). It loads a
// few tiny eBPF socket-filter programs through the bpf(2) syscall so the JIT
// registers [bpf] symbols in /proc/kallsyms, prints "bpfload: N" and then
// sleeps forever, holding the program file descriptors open.
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// sysBPF is bpf(2)'s number: 321 on amd64, 280 on arm64 (asm-generic), 386
// on arm (EABI), 357 on i386, 351 on s390x, 361 on powerpc, 280 on riscv64
// (asm-generic).
var sysBPF = map[string]uintptr{"amd64": 321, "arm64": 280, "arm": 386, "386": 357, "s390x": 351, "ppc64le": 361, "riscv64": 280}[runtime.GOARCH]

const (
	bpfProgLoad             = 5
	bpfProgTypeSocketFilter = 1
)

// progLoadAttr is the prefix of union bpf_attr used by BPF_PROG_LOAD.
type progLoadAttr struct {
	progType    uint32
	insnCnt     uint32
	insns       uint64
	license     uint64
	logLevel    uint32
	logSize     uint32
	logBuf      uint64
	kernVersion uint32
	progFlags   uint32
	progName    [16]byte
}

func main() {
	// r0 = k; exit
	names := []string{"kds_alpha", "kds_beta", "kds_gamma"}
	license := []byte("GPL\x00")
	loaded := 0
	for i, name := range names {
		// struct bpf_insn in the host's byte order: code u8, dst_reg:4 and
		// src_reg:4 (both r0 here), off s16, imm s32.
		insns := make([]byte, 16)
		insns[0] = 0xb7 // BPF_ALU64|BPF_MOV|BPF_K dst=r0 imm=i+1
		binary.NativeEndian.PutUint32(insns[4:], uint32(i+1))
		insns[8] = 0x95 // BPF_JMP|BPF_EXIT
		attr := progLoadAttr{
			progType: bpfProgTypeSocketFilter,
			insnCnt:  uint32(len(insns) / 8),
			insns:    uint64(uintptr(unsafe.Pointer(&insns[0]))),
			license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		}
		copy(attr.progName[:15], name)
		fd, _, errno := syscall.Syscall(sysBPF, bpfProgLoad, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno != 0 {
			fmt.Fprintf(os.Stderr, "bpfload: %s: %v\n", name, errno)
			continue
		}
		_ = fd
		loaded++
	}
	fmt.Printf("bpfload: %d\n", loaded)
	os.Stdout.Sync()
	for {
		time.Sleep(time.Hour)
	}
}
