package systemd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// delegateEnv makes the test binary play the daemon in a unit's cgroup:
// once a line arrives on stdin it runs Delegate on itself, prints the
// layout as JSON (or "error: ..."), and waits for stdin to close.
const delegateEnv = "POOLAGENT_SYSTEMD_TEST_DELEGATE"

func TestMain(m *testing.M) {
	if os.Getenv(delegateEnv) != "" {
		os.Exit(delegateChild())
	}
	kerneltest.Main(m)
}

func delegateChild() int {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return 2
	}
	m, err := cgroupfs.Detect("/")
	if err == nil {
		var l Layout
		if l, err = Delegate(m, "/", os.Getpid()); err == nil {
			json.NewEncoder(os.Stdout).Encode(l)
		}
	}
	if err != nil {
		fmt.Println("error:", err)
	}
	in.ReadString('\n') // until stdin closes
	return 0
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    procCgroup
		wantErr string
	}{
		{
			name: "unified",
			in:   "0::/system.slice/poolagent.service\n",
			want: procCgroup{v2: "/system.slice/poolagent.service", hasV2: true, v1: map[string]string{}},
		},
		{
			name: "hybrid",
			in: "13:cpuacct:/system.slice/poolagent.service\n12:cpu:/system.slice/poolagent.service/agent\n" +
				"5:memory:/system.slice/poolagent.service\n1:name=systemd:/system.slice/poolagent.service\n0::/system.slice/poolagent.service\n",
			want: procCgroup{v2: "/system.slice/poolagent.service", hasV2: true, v1: map[string]string{
				"cpuacct": "/system.slice/poolagent.service", "cpu": "/system.slice/poolagent.service/agent",
				"memory": "/system.slice/poolagent.service",
			}},
		},
		{
			name: "co-mounted",
			in:   "4:cpu,cpuacct:/a\n",
			want: procCgroup{v1: map[string]string{"cpu": "/a", "cpuacct": "/a"}},
		},
		{name: "no colons", in: "garbage\n", wantErr: `line 1 "garbage": want ID:CONTROLLERS:PATH`},
		{name: "bad id", in: "x:cpu:/a\n", wantErr: `hierarchy id "x" is not a number`},
		{name: "relative path", in: "0::a/b\n", wantErr: `path "a/b" is not absolute`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.v2 != tc.want.v2 || got.hasV2 != tc.want.hasV2 || len(got.v1) != len(tc.want.v1) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for c, p := range tc.want.v1 {
				if got.v1[c] != p {
					t.Errorf("v1[%s] = %q, want %q", c, got.v1[c], p)
				}
			}
		})
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("12:cpu,cpuacct:/system.slice/x.service\n0::/system.slice/x.service\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cg, err := parseProcCgroup(data)
		if err != nil {
			return
		}
		for c, p := range cg.v1 {
			if !strings.HasPrefix(p, "/") || c == "" || strings.HasPrefix(c, "name=") {
				t.Fatalf("accepted v1 %q -> %q", c, p)
			}
		}
		if cg.hasV2 && !strings.HasPrefix(cg.v2, "/") {
			t.Fatalf("accepted v2 path %q", cg.v2)
		}
	})
}

// fixture builds root/proc/PID/cgroup and a cgroup2 mount directory for
// Delegate's checks that need no kernel.
func fixture(t *testing.T, procCgroup, controllers string) (cgroupfs.Mounts, string) {
	t.Helper()
	root := t.TempDir()
	proc := filepath.Join(root, "proc", "42")
	unit := filepath.Join(root, "sys/fs/cgroup/system.slice/poolagent.service")
	for _, d := range []string{proc, filepath.Join(unit, AgentLeaf)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(proc, "cgroup"):                     procCgroup,
		filepath.Join(unit, "cgroup.controllers"):         controllers,
		filepath.Join(unit, "cgroup.subtree_control"):     "",
		filepath.Join(unit, "cgroup.procs"):               "",
		filepath.Join(unit, AgentLeaf, "cgroup.procs"):    "",
		filepath.Join(root, "sys/fs/cgroup/cgroup.procs"): "",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := cgroupfs.Mounts{Mode: cgroupfs.Unified, Unified: filepath.Join(root, "sys/fs/cgroup"), UnifiedControllers: []string{"cpu", "memory"}}
	return m, root
}

func TestDelegateRefuses(t *testing.T) {
	tests := []struct {
		name, procCgroup, controllers, wantErr string
		sentinel                               error
	}{
		{name: "root cgroup", procCgroup: "0::/\n", controllers: "cpu", wantErr: "is in the root cpu cgroup", sentinel: ErrNotDelegated},
		{name: "cpu not delegated", procCgroup: "0::/system.slice/poolagent.service\n", controllers: "memory pids", wantErr: `the cpu controller was not delegated`},
		{name: "no v2 line", procCgroup: "1:name=systemd:/x\n", controllers: "cpu", wantErr: "names no cgroup for cpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, root := fixture(t, tc.procCgroup, tc.controllers)
			_, err := Delegate(m, root, 42)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Delegate error %v, want %q", err, tc.wantErr)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tc.sentinel)
			}
		})
	}
}

func TestDelegateWritesLayout(t *testing.T) {
	m, root := fixture(t, "0::/system.slice/poolagent.service/agent\n", "cpu io memory")
	l, err := Delegate(m, root, 42)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(root, "sys/fs/cgroup/system.slice/poolagent.service")
	want := Layout{Unit: unit, Agent: filepath.Join(unit, "agent"), PoolRoot: filepath.Join(unit, "pools")}
	if l != want {
		t.Fatalf("layout %+v, want %+v (a process already in agent/ keeps its unit)", l, want)
	}
	if b, _ := os.ReadFile(filepath.Join(unit, "agent/cgroup.procs")); string(b) != "42" {
		t.Errorf("agent/cgroup.procs = %q, want 42", b)
	}
	// A plain file keeps only the last write: memory comes after cpu.
	if b, _ := os.ReadFile(filepath.Join(unit, "cgroup.subtree_control")); string(b) != "+memory" {
		t.Errorf("last subtree_control write %q, want +memory", b)
	}
}

// TestKernelDelegation prepares a cgroup the way systemd delegates one to
// a unit with Delegate=yes (a cgroup of its own, the cpu controller
// available, the main process inside), lets the process run Delegate, and
// checks the layout: the unit's cgroup holds no process, the daemon is in
// agent/, and a pool created in pools/ beside it gets the cpu controller.
func TestKernelDelegation(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	host := kerneltest.Require(t, need)
	unit := host.NewRoot(t, need)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), delegateEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered after NewRoot, so it runs first: the child is gone before
	// the test cgroups are removed.
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	pid := strconv.Itoa(cmd.Process.Pid)
	// systemd starts the main process in the unit's own cgroup.
	for _, d := range append([]string{unit.Path}, unit.Twins...) {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(pid), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer from the daemon process: %v", err)
	}
	var l Layout
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatalf("Delegate in the unit's cgroup: %s", line)
	}
	want := Layout{Unit: unit.Path, Agent: filepath.Join(unit.Path, AgentLeaf), PoolRoot: filepath.Join(unit.Path, PoolsDir)}
	if l != want {
		t.Fatalf("layout %+v, want %+v", l, want)
	}
	for _, d := range append([]string{unit.Path}, unit.Twins...) {
		if got := procs(t, d); len(got) != 0 {
			t.Errorf("%s still holds %v", d, got)
		}
		if got := procs(t, filepath.Join(d, AgentLeaf)); !slices.Equal(got, []string{pid}) {
			t.Errorf("%s/agent holds %v, want the daemon %s", d, got, pid)
		}
	}
	// A pool beside agent/ (what cgroupfs creates below the pool root).
	pool := filepath.Join(l.PoolRoot, "olap")
	for _, d := range []string{l.PoolRoot, pool} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if host.Mode == kerneltest.V2 {
		sub, err := os.ReadFile(filepath.Join(unit.Path, "cgroup.subtree_control"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Fields(string(sub)), "cpu") {
			t.Errorf("unit cgroup.subtree_control %q lacks cpu", sub)
		}
		if err := os.WriteFile(filepath.Join(l.PoolRoot, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			t.Fatalf("enable cpu for pools: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(pool, "cpu.max")); host.Mode == kerneltest.V2 && err != nil {
		t.Errorf("pool beside the daemon has no cpu controller: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pool, "cpu.cfs_quota_us")); host.Mode == kerneltest.V1 && err != nil {
		t.Errorf("pool beside the daemon has no cpu controller: %v", err)
	}
}

// procs lists a cgroup's cgroup.procs.
func procs(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}
