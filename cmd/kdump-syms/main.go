// Command kdump-syms recovers a Linux kernel's symbols from a crash dump.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
