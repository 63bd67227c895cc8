package main

import (
	"bytes"
	"fmt"
	"io"
)

// cmdVMCOREINFO prints the dump's VMCOREINFO note as the kernel wrote it,
// or, given keys, each key's value on its own line.
func cmdVMCOREINFO(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("vmcoreinfo", "vmcoreinfo [flags] VMCORE [KEY...]")
	c.register(fs)
	pos, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("vmcoreinfo: no VMCORE given")
	}
	s, err := c.open(pos[:1], stderr)
	if err != nil {
		return err
	}
	defer c.finish(s, stderr)
	d := s.Dump()
	raw := d.VMCOREINFO()
	if raw == nil {
		if err := d.InfoErr(); err != nil {
			return fmt.Errorf("vmcoreinfo: %w", err)
		}
		return fmt.Errorf("vmcoreinfo: the dump has no VMCOREINFO")
	}
	if len(pos) == 1 {
		text := bytes.TrimRight(raw, "\x00")
		if len(text) > 0 && text[len(text)-1] != '\n' {
			text = append(text[:len(text):len(text)], '\n')
		}
		_, err := stdout.Write(text)
		return err
	}
	in := d.Info()
	if in == nil {
		return fmt.Errorf("vmcoreinfo: %w", d.InfoErr())
	}
	missing := 0
	for _, k := range pos[1:] {
		v, ok := in.Get(k)
		if !ok {
			missing++
			fmt.Fprintf(stderr, "kdump-syms: vmcoreinfo: no key %q\n", k)
			continue
		}
		fmt.Fprintln(stdout, v)
	}
	if missing > 0 {
		return exitCode(exitPartial)
	}
	return nil
}
