package kerneltest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func fixture(name string) string { return filepath.Join("../../testdata/cgroupfs/mounts", name) }

func TestCheck(t *testing.T) {
	both := []Mode{V1, V2}
	tests := []struct {
		name     string
		need     Need
		envMode  string
		vmV1     bool
		euid     int
		root     string
		wantMode Mode   // "" = cannot run
		reason   string // part of the reason
		other    bool
	}{
		{name: "hybrid host runs v1", need: Need{Modes: both, Controllers: []string{"cpuacct"}}, root: fixture("hybrid"), wantMode: V1},
		{name: "hybrid host, v2-only test belongs to the v2 run", need: Need{Modes: []Mode{V2}}, root: fixture("hybrid"), reason: "cgroup v1", other: true},
		{name: "v2 run skips a v1-only test", need: Need{Modes: []Mode{V1}}, envMode: "v2", root: fixture("unified"), reason: "this run covers v2", other: true},
		{name: "v2 run on a v1 host cannot run", need: Need{Modes: both}, envMode: "v2", root: fixture("hybrid"), reason: "cpu controller is cgroup v1"},
		{name: "unified host runs v2", need: Need{Modes: both}, root: fixture("unified"), wantMode: V2},
		{name: "unified: cpuacct is ignored", need: Need{Modes: both, Controllers: []string{"cpuacct"}}, root: fixture("unified"), wantMode: V2},
		{name: "unified: memory not in subtree_control", need: Need{Modes: both, Controllers: []string{"memory"}}, envMode: "v2", root: fixture("unified"), reason: "+memory"},
		{name: "v1 memory is refused", need: Need{Modes: both, Controllers: []string{"memory"}}, root: fixture("hybrid"), reason: "never tested"},
		{name: "v1 pids belongs to the VM's v1 boot", need: Need{Modes: both, Controllers: []string{"pids"}}, root: fixture("hybrid"), reason: "only in the busybox VM", other: true},
		{name: "v1 pids in the VM's v1 boot", need: Need{Modes: both, Controllers: []string{"pids"}}, envMode: "v1", vmV1: true, root: fixture("hybrid"), wantMode: V1},
		{name: "unified: pids is the test's to enable", need: Need{Modes: both, Controllers: []string{"pids"}}, envMode: "v2", root: fixture("unified"), wantMode: V2},
		{name: "missing v1 hierarchy", need: Need{Modes: both, Controllers: []string{"rdma"}}, root: fixture("hybrid"), reason: "no v1 rdma"},
		{name: "not root", need: Need{Modes: both}, euid: 1000, root: fixture("hybrid"), reason: "needs root"},
		{name: "no cpu controller", need: Need{Modes: both}, root: fixture("unified-nocpu"), reason: "no cpu controller"},
		{name: "no cgroups at all", need: Need{Modes: both}, root: fixture("nocgroup"), reason: "no cpu controller"},
		{name: "bad mode variable", need: Need{Modes: both}, envMode: "v3", root: fixture("hybrid"), reason: "want v1, v2 or empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, reason, other := check(tt.need, tt.envMode, tt.vmV1, tt.euid, tt.root)
			if tt.wantMode != "" {
				if reason != "" {
					t.Fatalf("cannot run: %s", reason)
				}
				if h.Mode != tt.wantMode {
					t.Fatalf("mode %s, want %s", h.Mode, tt.wantMode)
				}
				return
			}
			if !strings.Contains(reason, tt.reason) || other != tt.other {
				t.Fatalf("reason %q other %v, want one containing %q other %v", reason, other, tt.reason, tt.other)
			}
		})
	}
}

// TestNoModeIsNeverSilent: a test in no mode could skip in every run, so
// Require refuses it outright.
func TestNoModeIsNeverSilent(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		Require(ft, Need{})
	}()
	if !ft.fatal {
		t.Fatal("Require accepted a Need without modes")
	}
}

type fatalRecorder struct {
	testing.TB
	fatal bool
}

func (f *fatalRecorder) Fatalf(string, ...any) { f.fatal = true; panic("fatal") }
func (f *fatalRecorder) Helper()               {}

func TestBurnEncoding(t *testing.T) {
	for _, b := range []Burn{{For: 2 * time.Second}, {For: 300 * time.Millisecond, Clock: CPUTime, Pin: true, CPU: 1}, {For: time.Minute, Pin: true}, {For: time.Second, Clock: CPUTime, Threads: 2}} {
		got, err := decodeBurn(b.encode())
		if err != nil || got != b {
			t.Errorf("%+v: round trip %+v, %v", b, got, err)
		}
	}
	if _, err := decodeBurn("soon 0 -1"); err == nil {
		t.Error("bad duration accepted")
	}
}

// TestKernelRootAndBurner runs a burner in the test's own cgroup and checks that
// the cgroup is gone afterwards, also with the burner still inside.
func TestKernelRootAndBurner(t *testing.T) {
	need := Need{Modes: []Mode{V1, V2}, Controllers: []string{"cpuacct"}}
	h := Require(t, need)
	var root Root
	t.Run("burn", func(t *testing.T) {
		root = h.NewRoot(t, need)
		root.Favour(t)
		b := StartBurner(t, Burn{For: 200 * time.Millisecond, Clock: CPUTime, Pin: true})
		for _, d := range append([]string{root.Path}, root.Twins...) {
			if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(b.PID)), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Go(); err != nil {
			t.Fatal(err)
		}
		cpu, err := b.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if cpu < 200*time.Millisecond {
			t.Errorf("burner used %s of CPU, want at least 200ms", cpu)
		}
		idle := StartBurner(t, Burn{For: time.Minute})
		if err := os.WriteFile(filepath.Join(root.Path, "cgroup.procs"), []byte(strconv.Itoa(idle.PID)), 0); err != nil {
			t.Fatal(err)
		}
		// the idle burner is still inside when the subtest ends
	})
	for _, d := range append([]string{root.Path}, root.Twins...) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still exists after cleanup (stat: %v)", d, err)
		}
	}
}
