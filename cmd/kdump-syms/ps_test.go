package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPsBtCorpus runs ps and bt on the guests whose ground truth has a
// task in D state on purpose (testdata/vmcores/internal/dstate): ps lists
// it in D, and bt --state D finds it, waiting in kernel_clone for its
// vfork child.
func TestPsBtCorpus(t *testing.T) {
	for _, name := range []string{"deb13-6.12-amd64", "deb13-6.12-arm64"} {
		t.Run(name, func(t *testing.T) {
			g := testutil.CorpusGuestNamed(t, name)
			if _, ok := g.ProcTasks(t); !ok {
				t.Skip("no task truth")
			}
			dump := g.RequireDump(t, testutil.DumpQEMUELF)[0]
			var out, errb bytes.Buffer
			code := run([]string{"ps", "--format", "json", dump}, nil, &out, &errb)
			require.Equal(t, exitOK, code, errb.String())
			var d []psTask
			for line := range strings.Lines(out.String()) {
				var p psTask
				require.NoError(t, json.Unmarshal([]byte(line), &p))
				if p.State == "D" {
					d = append(d, p)
				}
			}
			require.Len(t, d, 1)
			assert.Equal(t, "dstate", d[0].Comm)
			assert.True(t, strings.HasPrefix(d[0].Task, "0x"))

			out.Reset()
			errb.Reset()
			code = run([]string{"bt", "--state", "D", dump}, nil, &out, &errb)
			require.Equal(t, exitOK, code, errb.String())
			assert.Contains(t, out.String(), "(dstate) state D")
			assert.Contains(t, out.String(), "kernel_clone+")
			assert.Contains(t, out.String(), "stopped: end of stack")

			out.Reset()
			code = run([]string{"bt", "--format", "json", dump, "1"}, nil, &out, &errb)
			require.Equal(t, exitOK, code, errb.String())
			var bt btJSON
			require.NoError(t, json.Unmarshal(out.Bytes(), &bt))
			assert.Equal(t, int32(1), bt.PID)
			assert.True(t, bt.OnCPU, "init crashed the machine")
			assert.NotEmpty(t, bt.Frames)

			code = run([]string{"bt", dump, "99999"}, nil, &out, &errb)
			assert.Equal(t, exitPartial, code)
			assert.Contains(t, errb.String(), "no task 99999")
		})
	}
}
