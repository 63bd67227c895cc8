// Package vmcoreinfo parses the VMCOREINFO note a Linux kernel leaves for
// dump tools: lines of KEY=VALUE text such as
//
//	OSRELEASE=6.1.0-18-amd64
//	PAGESIZE=4096
//	SYMBOL(_stext)=ffffffff97200000
//	OFFSET(list_head.next)=0
//	NUMBER(phys_base)=-260046848
//	KERNELOFFSET=16200000
//
// [Parse] keeps every line, known or not, in its original order, and offers
// typed accessors for the families the kernel prints (SYMBOL, SIZE, OFFSET,
// LENGTH, NUMBER, CONFIG_*) and for the well-known scalar keys. Each family
// has its own number base, as the kernel's macros print them: SYMBOL and
// KERNELOFFSET in hex without 0x, SIZE/OFFSET/LENGTH/PAGESIZE/CRASHTIME in
// decimal, NUMBER as a signed decimal or a hand-printed 0x-prefixed hex.
//
// # Security
//
// The parser is built for untrusted input and fuzzed (FuzzParse): it
// allocates in proportion to the text it is given, tolerates NUL padding
// and a missing final newline, and reports a malformed line with its number.
package vmcoreinfo
