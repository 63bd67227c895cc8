package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"
)

// qmp connects to a QMP unix socket, negotiates capabilities and runs each
// command (a JSON object) in order, printing every reply. An error reply
// fails the run. Events are printed and skipped.
func qmp(sock string, cmds []string) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	readReply := func() (map[string]json.RawMessage, error) {
		for {
			c.SetReadDeadline(time.Now().Add(30 * time.Minute))
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return nil, err
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, fmt.Errorf("bad QMP line %q: %w", line, err)
			}
			if _, ok := m["event"]; ok {
				fmt.Fprintf(os.Stderr, "qmp event: %s", line)
				continue
			}
			return m, nil
		}
	}
	if _, err := readReply(); err != nil { // greeting
		return err
	}
	for _, cmd := range append([]string{`{"execute":"qmp_capabilities"}`}, cmds...) {
		if _, err := fmt.Fprintf(c, "%s\n", cmd); err != nil {
			return err
		}
		m, err := readReply()
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		if e, ok := m["error"]; ok {
			return fmt.Errorf("%s: %s", cmd, e)
		}
		fmt.Printf("%s\n", m["return"])
	}
	return nil
}
