package cgroupfs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/planner"
)

// TestKernelWeightShare: the weights alone are a guarantee under
// contention (docs/pools.md, "CPU guarantees"). Two pools without a CPU
// limit, weights 300 and 100 (v1: the cpu.shares they convert to), each
// run a query of two busy threads pinned to CPU 0 for three seconds (so
// they contend whatever the number of CPUs the machine has): over a
// second in which both burn, the first gets 75% of the CPU time the two
// used, the second 25%, each within 7 points. Judged only while the machine gives the test its CPU
// (kerneltest.Root.Retry).
func TestKernelWeightShare(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	k.root.Favour(t)
	d := planner.Desired{
		Node: planner.Node{CPUs: 2, PeriodUsec: 100000},
		Pools: []*planner.PoolState{
			{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
			{Name: "heavy", Pool: cg(-1, 100000, 0, 300), Query: cg(-1, 100000, 0, 0)},
			{Name: "light", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
		},
	}
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	k.root.Retry(t, 3, func(n int) string {
		var burners []*kerneltest.Burner
		for _, ps := range d.Pools[1:] {
			b := kerneltest.StartBurner(t, kerneltest.Burn{For: 3 * time.Second, Threads: 2, Pin: true, CPU: 0})
			if err := k.tree.PlaceQuery(*ps, fmt.Sprintf("q%d", n), b.PID); err != nil {
				t.Fatal(err)
			}
			burners = append(burners, b)
		}
		for _, b := range burners {
			if err := b.Go(); err != nil {
				t.Fatal(err)
			}
		}
		// The shares are read over a second in which both burn: the
		// burners start one after the other, and on a busy machine
		// one may burn alone for a while at either end of its three
		// seconds, which is not the contention judged.
		started := time.Now()
		time.Sleep(300 * time.Millisecond)
		from := []time.Duration{kerneltest.ProcessCPU(t, burners[0].PID), kerneltest.ProcessCPU(t, burners[1].PID)}
		time.Sleep(time.Second)
		used := []time.Duration{kerneltest.ProcessCPU(t, burners[0].PID) - from[0], kerneltest.ProcessCPU(t, burners[1].PID) - from[1]}
		late := time.Since(started)
		for _, b := range burners {
			if _, err := b.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		for _, ps := range d.Pools[1:] {
			if err := k.tree.RemoveQuery(ps.Name, fmt.Sprintf("q%d", n)); err != nil {
				t.Fatal(err)
			}
		}
		if late > 2800*time.Millisecond {
			return fmt.Sprintf("the burners' CPU time was read %v after they started, not within their three seconds", late)
		}
		if used[0]+used[1] == 0 {
			return "neither pool's burner ran in the second read"
		}
		share := used[0].Seconds() / (used[0] + used[1]).Seconds()
		t.Logf("weights 300:100: heavy used %v, light %v of CPU time in the second both burned: heavy's share %.1f%% (want 75%%)", used[0], used[1], share*100)
		if share < 0.68 || share > 0.82 {
			return fmt.Sprintf("heavy's share %.1f%% of the CPU time the two pools used, want 75%% ± 7", share*100)
		}
		return ""
	})
}
