// Command corpustool is the generator's helper for the vmcore corpus. It is
// not part of the library; see ../../README.md.
//
//	corpustool fixelf IN OUT      copy a QEMU ELF dump so makedumpfile can read it
//	corpustool note FILE          print the VMCOREINFO note of an ELF dump
//	corpustool codecs FILE        print page-codec counts of a dump as JSON
//	corpustool snappy IN OUT      re-encode a raw-page kdump file with snappy pages
//	corpustool qmp SOCKET CMD...  run QMP commands (JSON objects) in order
//	corpustool manifest DIR CACHE write DIR/manifest.json and DIR/SHA256SUMS
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "corpustool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: corpustool fixelf|note|codecs|snappy|qmp|manifest ...")
	}
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "fixelf" && len(rest) == 2:
		return fixELF(rest[0], rest[1])
	case cmd == "note" && (len(rest) == 1 || len(rest) == 2):
		sys := ""
		if len(rest) == 2 {
			sys = rest[1]
		}
		desc, err := vmcoreinfoNote(rest[0], sys)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(desc)
		return err
	case cmd == "codecs" && len(rest) == 1:
		info, err := fileCodecs(rest[0])
		if err != nil {
			return err
		}
		return printJSON(info)
	case cmd == "snappy" && len(rest) == 2:
		return reencodeSnappy(rest[0], rest[1])
	case cmd == "qmp" && len(rest) >= 1:
		return qmp(rest[0], rest[1:])
	case cmd == "manifest" && len(rest) == 2:
		return manifest(rest[0], rest[1])
	}
	return fmt.Errorf("bad arguments: %q", args)
}
