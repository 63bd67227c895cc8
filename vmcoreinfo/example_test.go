package vmcoreinfo_test

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

func ExampleParse() {
	text := []byte("OSRELEASE=6.12.117+deb13-amd64\n" +
		"PAGESIZE=4096\n" +
		"SYMBOL(_stext)=ffffffffa1000000\n" +
		"NUMBER(phys_base)=-373293056\n" +
		"KERNELOFFSET=20000000\n")
	in, err := vmcoreinfo.Parse(text)
	if err != nil {
		panic(err)
	}
	stext, _ := in.Symbol("_stext")
	physBase, _ := in.Number("phys_base")
	slide, _ := in.KernelOffset()
	fmt.Println(in.OSRelease(), in.Arch())
	fmt.Printf("_stext %#x, phys_base %d, KASLR slide %#x\n", stext, int64(physBase), slide)
	_, err = in.Require("kallsyms_names")
	fmt.Println(err)
	// Output:
	// 6.12.117+deb13-amd64 x86_64
	// _stext 0xffffffffa1000000, phys_base -373293056, KASLR slide 0x20000000
	// vmcoreinfo: SYMBOL(kallsyms_names): vmcoreinfo: key not present
}
