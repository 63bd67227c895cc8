package vmcore_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcore"
)

func ExampleOpen() {
	// A bundled real dump: Debian 6.12 under QEMU, makedumpfile -c -d 31,
	// cut down by kdump-syms extract and xz-compressed (Open unwraps it).
	d, err := vmcore.Open("../testdata/vmcores/deb13-6.12-amd64/dumps/mdf-d31-zlib.kdump.xz")
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	info := d.Info()
	fmt.Println(d.Format(), d.Arch().Name, d.PageSize(), info.OSRelease())

	// Kernel virtual memory: the banner, at its address from kallsyms.
	kmem, err := d.Kernel()
	if err != nil {
		log.Fatal(err)
	}
	banner, err := memory.CString(kmem, 0xffffffffb9794ce0, 256)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Fields(banner)[:3])
	// Output:
	// xz+kdump x86_64 4096 6.12.117+deb13-amd64
	// [Linux version 6.12.117+deb13-amd64]
}
