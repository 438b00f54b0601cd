package compare

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/poolagent/poolagent/internal/kerneltest"
)

// workerArg makes the test binary a compare worker (see TestMain), so the
// real-kernel test needs no poolagent binary.
const workerArg = "compare-worker"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		spec, err := ParseWorkerArgs(os.Args[2:])
		if err == nil {
			err = RunWorker(spec, os.Stdin, os.Stdout)
		}
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKernelCompare runs the built-in scenario (one pool at 40% of CPU 0,
// two pinned queries, about 1 s) three times for real and holds the
// kernel-faithful model to the pinned target: nr_throttled within ±1
// period, throttled_usec and usage_usec within 5%, on the mean of the runs.
// The queries carry their pool's allocation (the same cpu.max as olap), so
// which level counts a throttled period is the kernel's race and only
// usage is held for them and the pool (see [Report.ties]). It runs on the
// host's cgroup v1 and in the cgroup v2 VM.
func TestKernelCompare(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	root.Favour(t)
	if h.Mode == kerneltest.V2 {
		if err := os.WriteFile(filepath.Join(root.Path, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sc := DefaultScenario()
	l, err := LayoutOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{
		Root:          filepath.Join(root.Path, "compare"),
		Repeat:        3,
		Kernel:        ReadKernelSettings("/proc", "/boot", KernelRelease()),
		WorkerCommand: []string{self, workerArg},
	}
	r, err := Measure(context.Background(), sc.Name, l, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(opt.Root); !os.IsNotExist(err) {
		t.Errorf("compare left its pool root %s behind (stat: %v)", opt.Root, err)
	}
	for _, g := range r.Groups {
		for _, f := range g.Fields {
			t.Logf("%s %s: measured %.1f [%d..%d], kernel %.1f", g.Path, f.Field, f.Measured.Mean, f.Measured.Min, f.Measured.Max, f.Kernel.Mean)
		}
		if len(g.Misses) > 0 {
			t.Errorf("%s: kernel model missed the %s target: %v", g.Path, r.Target.Class, g.Misses)
		}
	}
	if r.Target.Class != "pinned" || !r.Env.Measured || len(r.Groups) != 3 {
		t.Errorf("report: target %q, measured %v, %d groups; want the pinned target, measured, 3 groups", r.Target.Class, r.Env.Measured, len(r.Groups))
	}
}
