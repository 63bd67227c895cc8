package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDidYouMean(t *testing.T) {
	for in, want := range map[string]string{"adr": "addr", "modles": "modules", "inf": "info", "extrct": "extract", "al": "all", "frobnicate": ""} {
		assert.Equal(t, want, suggest(in), in)
	}
	code, _, stderr := runCLI("modles", "x")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, []string{`kdump-syms: unknown command "modles"; did you mean "modules"? (kdump-syms --help lists the commands)`}, stderrLines(stderr))
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version", "-version"} {
		code, stdout, _ := runCLI(arg)
		assert.Equal(t, exitOK, code)
		assert.True(t, strings.HasPrefix(stdout, "kdump-syms "), stdout)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "c300b01"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	assert.Equal(t, "kdump-syms v0.3.0 revision c300b01+dirty (2026-12-01T10:00:00Z) go1.26.8", versionLine(bi))
	assert.Equal(t, "kdump-syms (devel) go1.26.8", versionLine(&debug.BuildInfo{GoVersion: "go1.26.8"}))
}

// TestHelpExamples: the overview and every command's --help show an
// example of the command, and the exit-status rule.
func TestHelpExamples(t *testing.T) {
	_, top, _ := runCLI("--help")
	assert.Contains(t, top, "Exit status (every command):")
	for cmd, ex := range examples {
		code, stdout, _ := runCLI(cmd, "--help")
		assert.Equal(t, exitOK, code, cmd)
		assert.Contains(t, stdout, "Example:\n  kdump-syms "+cmd, cmd)
		assert.Contains(t, top, strings.Split(ex, ";")[0], cmd)
	}
}
