package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kdumpsyms/kdumpsyms/elfcore"
	"github.com/kdumpsyms/kdumpsyms/internal/testutil"
)

// dictLine is a line volatility3's kmsg adds for a record's device
// information, which dmesg does not print.
var dictLine = regexp.MustCompile(`^ (SUBSYSTEM|DEVICE)=`)

// Volatility3Env names a volatility3 source tree (the directory holding
// vol.py) for TestVolatility3; Volatility3GuestsEnv the corpus guests it
// runs on, comma-separated.
const (
	Volatility3Env       = "KDUMP_SYMS_VOLATILITY3"
	Volatility3GuestsEnv = "KDUMP_SYMS_VOL3_GUESTS"
	// PythonEnv names the Python interpreter; python3 by default.
	PythonEnv = "KDUMP_SYMS_PYTHON"
)

// vol3DefaultGuests are the guests volatility3 2.x can read: x86_64 (it
// has no arm64 or s390x address translation before 2.20).
var vol3DefaultGuests = []string{"deb13-6.12-amd64", "deb12-6.1-amd64"}

// TestVolatility3 is the real client: for each guest it writes a LiME
// image of the full QEMU dump, exports the kernel's ISF from that image
// with kdump-syms, and runs volatility3's linux.lsmod and linux.pslist on
// the image with only that ISF. lsmod must list exactly the modules (and
// sizes) of the guest's /proc/modules; pslist must list the guest's
// processes: /init (PID 1, comm "init") and kthreadd (PID 2) as roots,
// bpfload as init's only child, every other task a kernel thread (parent
// kthreadd), among them ksoftirqd/0 and kswapd0; linux.ebpf the [bpf]
// programs of the guest's /proc/kallsyms, by tag and name; linux.mountinfo
// (before 6.8) the mounts /init makes; linux.kmsg the guest's dmesg and
// what kdump-syms dmesg reads.
//
// Opt-in: set KDUMP_SYMS_VOLATILITY3 to a volatility3 source tree
// (testdata/vmcores/vol3-check does, and says how), and have the full
// corpus dumps (KDUMP_SYMS_CORPUS). volatility3 needs python3-pefile
// (Debian), and validates the ISF against its schema when
// python3-jsonschema is installed.
func TestVolatility3(t *testing.T) {
	tree := os.Getenv(Volatility3Env)
	if tree == "" {
		t.Skipf("set %s to a volatility3 source tree to run volatility3 on exported ISF files", Volatility3Env)
	}
	vol := filepath.Join(tree, "vol.py")
	if _, err := os.Stat(vol); err != nil {
		t.Fatalf("%s=%s: %v", Volatility3Env, tree, err)
	}
	python := os.Getenv(PythonEnv)
	if python == "" {
		python = "python3"
	}
	python, err := exec.LookPath(python)
	if err != nil {
		t.Skipf("no Python to run volatility3: %v", err)
	}
	// volatility3 checks each ISF against its schema when it can import
	// jsonschema, and else takes it as valid: say which.
	if err := exec.Command(python, "-c", "import jsonschema").Run(); err != nil {
		t.Logf("%s cannot import jsonschema (Debian: python3-jsonschema): volatility3 will not check the ISF against its schema", python)
	} else {
		t.Logf("volatility3 checks the ISF against its schema (jsonschema found)")
	}
	guests := vol3DefaultGuests
	if s := os.Getenv(Volatility3GuestsEnv); s != "" {
		guests = strings.Split(s, ",")
	}
	for _, name := range guests {
		g := testutil.CorpusGuestNamed(t, name)
		t.Run(name, func(t *testing.T) {
			src := g.RequireFullDump(t, testutil.DumpQEMUELF)[0]
			dir := t.TempDir()
			image := filepath.Join(dir, name+".lime")
			writeLiME(t, src, image)
			symdir := filepath.Join(dir, "symbols")
			isf := filepath.Join(symdir, "linux", name+".json")
			require.NoError(t, os.MkdirAll(filepath.Dir(isf), 0o755))
			code, _, stderr := runCLI("export", "--format", "isf", "-o", isf, image)
			require.Equal(t, exitOK, code, stderr)
			cache := filepath.Join(dir, "cache")
			require.NoError(t, os.MkdirAll(cache, 0o755))
			runVol := func(plugin string) []map[string]any {
				t.Helper()
				start := time.Now()
				cmd := exec.Command(python, vol, "--offline", "--cache-path", cache, "-q", "-r", "json",
					"-f", image, "-s", symdir, plugin)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				require.NoError(t, err, "%s: %s", plugin, stderr.String())
				out := stdout.Bytes()
				i := bytes.IndexByte(out, '[') // after the "Volatility 3 Framework" line
				require.GreaterOrEqual(t, i, 0, "%s printed no JSON: %s\n%s", plugin, out, stderr.String())
				var rows []map[string]any
				require.NoError(t, json.Unmarshal(out[i:], &rows), "%s: %s", plugin, out)
				t.Logf("vol %s: %d rows in %v", plugin, len(rows), time.Since(start).Round(time.Second))
				return rows
			}

			type mod struct {
				name string
				size float64
			}
			var want, got []mod
			for _, m := range g.Modules(t) {
				want = append(want, mod{m.Name, float64(m.Size)})
			}
			var lines []string
			for _, r := range runVol("linux.lsmod") {
				name, _ := r["Name"].(string)
				size, _ := r["Size"].(float64)
				got = append(got, mod{name, size})
				lines = append(lines, name)
			}
			t.Logf("lsmod: %s", strings.Join(lines, " "))
			assert.Equal(t, want, got, "lsmod lists /proc/modules, in its order")

			type task struct {
				pid, ppid float64
				comm      string
			}
			byPID := map[float64]task{}
			var kthreads, users []string
			for _, r := range runVol("linux.pslist") {
				tk := task{r["PID"].(float64), r["PPID"].(float64), r["COMM"].(string)}
				assert.Equal(t, r["PID"], r["TID"], "pslist lists thread group leaders")
				assert.NotContains(t, byPID, tk.pid)
				byPID[tk.pid] = tk
				switch tk.ppid {
				case 2:
					kthreads = append(kthreads, tk.comm)
				case 1:
					users = append(users, tk.comm)
				default:
					assert.Contains(t, []float64{1, 2}, tk.pid, "%+v: only init and kthreadd have no parent", tk)
				}
			}
			t.Logf("pslist: %d tasks; init's children %v; %d kernel threads: %s", len(byPID), users, len(kthreads), strings.Join(kthreads, " "))
			assert.Equal(t, task{1, 0, "init"}, byPID[1])
			assert.Equal(t, task{2, 0, "kthreadd"}, byPID[2])
			assert.Equal(t, []string{"bpfload"}, users, "init's one background child")
			for _, k := range []string{"ksoftirqd/0", "kswapd0"} {
				assert.True(t, slices.Contains(kthreads, k), "kernel thread %s", k)
			}

			// ebpf walks prog_idr (typed struct idr) to the bpf_prog
			// structs: the programs the guest's /proc/kallsyms lists as
			// [bpf] lines, bpf_prog_TAG_NAME.
			var wantProgs, gotProgs []string
			for _, e := range g.Kallsyms(t) {
				if e.Module == "bpf" {
					wantProgs = append(wantProgs, e.Name)
				}
			}
			for _, r := range runVol("linux.ebpf") {
				gotProgs = append(gotProgs, fmt.Sprintf("bpf_prog_%s_%s", r["Tag"], r["Name"]))
			}
			slices.Sort(wantProgs)
			slices.Sort(gotProgs)
			assert.Equal(t, wantProgs, gotProgs, "ebpf: the [bpf] programs of /proc/kallsyms")
			t.Logf("ebpf: %v", gotProgs)

			// mountinfo: the mounts /init makes (kernels before 6.8: this
			// volatility3 looks for struct mount's mnt_list, which 6.8
			// replaced by mnt_node).
			if rel := strings.TrimSpace(g.Uname(t)); releaseBefore(rel, 6, 8) {
				mounts := map[float64]map[string]string{} // namespace → mount point → fs type
				for _, r := range runVol("linux.mountinfo") {
					ns := r["MNT_NS_ID"].(float64)
					if mounts[ns] == nil {
						mounts[ns] = map[string]string{}
					}
					mounts[ns][r["MOUNT_POINT"].(string)] = r["FSTYPE"].(string)
				}
				want := map[string]string{"/": "rootfs", "/proc": "proc", "/sys": "sysfs", "/dev": "devtmpfs", "/sys/kernel/tracing": "tracefs"}
				found := false
				for ns, m := range mounts {
					if _, ok := m["/proc"]; ok {
						assert.Equal(t, want, m, "mount namespace %v", ns)
						found = true
					}
				}
				assert.True(t, found, "mountinfo: no namespace with /proc: %v", mounts)
			} else {
				t.Logf("mountinfo not checked on %s: volatility3 2.11 reads struct mount's mnt_list, gone in 6.8", rel)
			}

			// kmsg reads the printk ring through prb's type and the
			// BTF's printk structs: its records (less the SUBSYSTEM= and
			// DEVICE= lines it adds) must be the guest's dmesg and what
			// kdump-syms dmesg reads from the image.
			var kmsg []string
			for _, r := range runVol("linux.kmsg") {
				line, _ := r["line"].(string)
				if dictLine.MatchString(line) {
					continue
				}
				kmsg = append(kmsg, fmt.Sprintf("[%12s] %s", r["timestamp"], line))
			}
			code, out, stderr := runCLI("dmesg", image)
			require.Equal(t, exitOK, code, stderr)
			ours := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			// volatility3 walks the ring from tail_id until it reaches
			// head_id, so it never prints the newest record.
			if assert.Len(t, kmsg, len(ours)-1, "kmsg: all records but the newest") {
				assert.Equal(t, ours[:len(ours)-1], kmsg)
			}
			truth, err := os.ReadFile(filepath.Join(g.Dir, "dmesg"))
			require.NoError(t, err)
			tl := strings.Split(strings.TrimSuffix(string(truth), "\n"), "\n")
			if assert.GreaterOrEqual(t, len(kmsg), len(tl)) {
				assert.Equal(t, tl, kmsg[:len(tl)], "the guest's dmesg, captured before the panic, is where kmsg starts")
			}
			t.Logf("kmsg: %d lines; the guest's dmesg (%d lines) and kdump-syms dmesg (%d) agree", len(kmsg), len(tl), len(ours))
		})
	}
}

// writeLiME writes every physical range of the ELF core at src as a LiME
// file at dst.
func writeLiME(t *testing.T, src, dst string) {
	t.Helper()
	f, err := elfcore.Open(src)
	require.NoError(t, err)
	defer f.Close()
	var rs []testutil.PhysRange
	for _, r := range f.PhysicalRanges() {
		rs = append(rs, testutil.PhysRange{Start: r.Start, Last: r.Last})
	}
	out, err := os.Create(dst)
	require.NoError(t, err)
	bw := bufio.NewWriterSize(out, 1<<20)
	require.NoError(t, testutil.WriteLiME(bw, f.Physical(), rs, binary.LittleEndian))
	require.NoError(t, bw.Flush())
	require.NoError(t, out.Close())
}
