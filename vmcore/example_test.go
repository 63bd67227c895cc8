package vmcore_test

import (
	"fmt"
	"log"

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

	// Kernel virtual memory, through the page tables: the name field of
	// xfs's struct module (its __this_module symbol, in module space).
	kmem, err := d.Kernel()
	if err != nil {
		log.Fatal(err)
	}
	const xfsModule = 0xffffffffc053eac0
	name, err := memory.CString(kmem, xfsModule+24, 56)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(name)
	// Output:
	// xz+kdump x86_64 4096 6.12.117+deb13-amd64
	// xfs
}
