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
	"time"

	"golang.org/x/sys/unix"

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
		k := &fakeKeepers{sliceDir: os.Getenv(delegateEnv), real: true}
		if l, err = Delegate(m, "/", os.Getpid(), k); err == nil {
			json.NewEncoder(os.Stdout).Encode(l)
		}
	}
	if err != nil {
		fmt.Println("error:", err)
	}
	in.ReadString('\n') // until stdin closes
	return 0
}

// fakeKeepers plays systemd-run: StartScope makes the scope's cgroup in
// sliceDir and puts a keeper in it, as systemd would. With real set the
// keeper is a real sleep process (the kernel test); else only files are
// written and the pids are made up.
type fakeKeepers struct {
	sliceDir      string
	real          bool
	scopes, loose int
	calls         []string
}

func (k *fakeKeepers) StartScope(name, slice string) (int, error) {
	k.calls = append(k.calls, "scope "+name+" in "+slice)
	dir := filepath.Join(k.sliceDir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	if !k.real {
		// The files the kernel would make, keep/ included.
		if err := os.Mkdir(filepath.Join(dir, KeepLeaf), 0o755); err != nil {
			return 0, err
		}
		for f, v := range map[string]string{"cgroup.controllers": "cpu io memory", "cgroup.subtree_control": "", "cgroup.procs": "77", "keep/cgroup.procs": ""} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				return 0, err
			}
		}
		return 77, nil
	}
	pid, err := k.Start()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	}
	return pid, err
}

func (k *fakeKeepers) Start() (int, error) {
	k.calls = append(k.calls, "keeper")
	if !k.real {
		return 78, nil
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go cmd.Wait()
	return cmd.Process.Pid, nil
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

// fixture builds root/proc/42/cgroup and a cgroup2 mount directory with
// system.slice/poolagent.service for Delegate's checks that need no
// kernel; the keepers make the scope beside the service.
func fixture(t *testing.T, procCgroup string) (cgroupfs.Mounts, string, *fakeKeepers) {
	t.Helper()
	root := t.TempDir()
	proc := filepath.Join(root, "proc", "42")
	slice := filepath.Join(root, "sys/fs/cgroup/system.slice")
	for _, d := range []string{proc, filepath.Join(slice, "poolagent.service")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(proc, "cgroup"), []byte(procCgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	m := cgroupfs.Mounts{Mode: cgroupfs.Unified, Unified: filepath.Join(root, "sys/fs/cgroup"), UnifiedControllers: []string{"cpu", "memory"}}
	return m, root, &fakeKeepers{sliceDir: slice}
}

func TestDelegateRefuses(t *testing.T) {
	tests := []struct {
		name, procCgroup, wantErr string
		sentinel                  error
	}{
		{name: "root cgroup", procCgroup: "0::/\n", wantErr: "is in cgroup /, not in a service below a slice", sentinel: ErrNotDelegated},
		{name: "not below a slice", procCgroup: "0::/poolagent.service\n", wantErr: "not in a service below a slice", sentinel: ErrNotDelegated},
		{name: "a scope, not a service", procCgroup: "0::/user.slice/session-1.scope\n", wantErr: "not in a service below a slice", sentinel: ErrNotDelegated},
		{name: "no systemd line", procCgroup: "4:cpu:/x\n", wantErr: "names no systemd cgroup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, root, k := fixture(t, tc.procCgroup)
			_, err := Delegate(m, root, 42, k)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Delegate error %v, want %q", err, tc.wantErr)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tc.sentinel)
			}
			if len(k.calls) != 0 {
				t.Errorf("keepers called: %v", k.calls)
			}
		})
	}
}

func TestDelegateCreatesScope(t *testing.T) {
	m, root, k := fixture(t, "0::/system.slice/poolagent.service\n")
	l, err := Delegate(m, root, 42, k)
	if err != nil {
		t.Fatal(err)
	}
	scope := filepath.Join(root, "sys/fs/cgroup/system.slice/poolagent-pools.scope")
	want := Layout{Scope: "poolagent-pools.scope", Dir: scope, Keeper: 77, PoolRoot: filepath.Join(scope, "pools"), Created: true}
	if l != want {
		t.Fatalf("layout %+v, want %+v", l, want)
	}
	if !slices.Equal(k.calls, []string{"scope poolagent-pools.scope in system.slice"}) {
		t.Errorf("keepers called %v, want one scope", k.calls)
	}
	if b, _ := os.ReadFile(filepath.Join(scope, "keep/cgroup.procs")); string(b) != "77" {
		t.Errorf("keep/cgroup.procs = %q, want the keeper 77", b)
	}
	// A plain file keeps only the last write: memory comes after cpu.
	if b, _ := os.ReadFile(filepath.Join(scope, "cgroup.subtree_control")); string(b) != "+memory" {
		t.Errorf("last subtree_control write %q, want +memory", b)
	}
	// The second start (a restart) adopts the scope and its keeper.
	k.calls = nil
	l, err = Delegate(m, root, 42, k)
	want.Created = false
	if err != nil || l != want || len(k.calls) != 0 {
		t.Fatalf("second Delegate: %+v, %v, keepers called %v; want %+v, nothing started", l, err, k.calls, want)
	}
	// A scope whose keeper is gone (queries still hold it) gets a new one.
	if err := os.WriteFile(filepath.Join(scope, "keep/cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scope, "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Delegate(m, root, 42, k)
	if err != nil || l.Keeper != 78 || l.Created || !slices.Equal(k.calls, []string{"keeper"}) {
		t.Fatalf("Delegate without a keeper: %+v, %v, keepers called %v; want a new keeper 78", l, err, k.calls)
	}
}

func TestDelegateRefusesScopeWithoutCPU(t *testing.T) {
	m, root, k := fixture(t, "0::/system.slice/poolagent.service\n")
	scope := filepath.Join(root, "sys/fs/cgroup/system.slice/poolagent-pools.scope")
	if err := os.MkdirAll(filepath.Join(scope, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"cgroup.controllers": "memory pids", "cgroup.procs": "", "keep/cgroup.procs": "55"} {
		if err := os.WriteFile(filepath.Join(scope, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Delegate(m, root, 42, k)
	if err == nil || !strings.Contains(err.Error(), "the cpu controller was not delegated to poolagent-pools.scope") {
		t.Fatalf("Delegate error %v, want the cpu controller missing", err)
	}
}

func TestScopeName(t *testing.T) {
	for unit, want := range map[string]string{"poolagent.service": "poolagent-pools.scope", "poolagent-b.service": "poolagent-b-pools.scope"} {
		if got := ScopeName(unit); got != want {
			t.Errorf("ScopeName(%q) = %q, want %q", unit, got, want)
		}
	}
}

// TestKernelDelegation prepares cgroups the way systemd has them for the
// service (a slice with the unit's cgroup, the main process inside), lets
// the process run Delegate with keepers that play systemd-run (the scope
// made beside the unit, a keeper in it), and checks the layout: the
// scope's cgroup holds no process, the keeper is in keep/, a pool created
// in pools/ gets the cpu controller, and a second run adopts the scope.
// v2 only: on a hybrid host systemd's own view of the unit is the unified
// hierarchy, which the tests do not touch; the systemd VM flavour runs the
// service for real (scripts/vm/systemd/lifecycle.sh).
func TestKernelDelegation(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V2}}
	host := kerneltest.Require(t, need)
	top := host.NewRoot(t, need)
	slice := filepath.Join(top.Path, "test.slice")
	unit := filepath.Join(slice, "poolagent.service")
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(top.Path, "cgroup.subtree_control"), filepath.Join(slice, "cgroup.subtree_control")} {
		if err := os.WriteFile(f, []byte("+cpu"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func() Layout {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), delegateEnv+"="+slice)
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
		defer func() {
			stdin.Close()
			cmd.Process.Kill()
			cmd.Wait()
		}()
		// systemd starts the main process in the unit's own cgroup.
		if err := os.WriteFile(filepath.Join(unit, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
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
		return l
	}
	l := run()
	scope := filepath.Join(slice, "poolagent-pools.scope")
	// Registered after NewRoot, so it runs first: the keeper is gone
	// before the test cgroups are removed. kill returns before the keeper
	// has exited, and its cgroup cannot be removed until it has.
	t.Cleanup(func() {
		unix.Kill(l.Keeper, unix.SIGKILL)
		keep := filepath.Join(scope, KeepLeaf, "cgroup.procs")
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			b, err := os.ReadFile(keep)
			if err != nil || !slices.Contains(strings.Fields(string(b)), strconv.Itoa(l.Keeper)) {
				return
			}
		}
	})
	want := Layout{Scope: "poolagent-pools.scope", Dir: scope, Keeper: l.Keeper, PoolRoot: filepath.Join(scope, PoolsDir), Created: true}
	if l != want || l.Keeper == 0 {
		t.Fatalf("layout %+v, want %+v", l, want)
	}
	if got := procs(t, scope); len(got) != 0 {
		t.Errorf("%s still holds %v", scope, got)
	}
	if got := procs(t, filepath.Join(scope, KeepLeaf)); !slices.Equal(got, []string{strconv.Itoa(l.Keeper)}) {
		t.Errorf("%s/keep holds %v, want the keeper %d", scope, got, l.Keeper)
	}
	// A pool below the pool root (what cgroupfs creates there).
	pool := filepath.Join(l.PoolRoot, "olap")
	for _, d := range []string{l.PoolRoot, pool} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := os.ReadFile(filepath.Join(scope, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(sub)), "cpu") {
		t.Errorf("scope cgroup.subtree_control %q lacks cpu", sub)
	}
	if err := os.WriteFile(filepath.Join(l.PoolRoot, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
		t.Fatalf("enable cpu for pools: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pool, "cpu.max")); err != nil {
		t.Errorf("pool in the scope has no cpu controller: %v", err)
	}
	// A restart: the scope is found, its keeper kept, nothing started.
	again := run()
	want.Created = false
	if again != want {
		t.Errorf("second Delegate: %+v, want %+v (the scope adopted)", again, want)
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
