package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/pooltree"
)

// BenchmarkIdleQueries: what long queries cost the daemon while they run.
// 200 queries sleep in their query cgroups on a real kernel; the daemon
// (in this process) adopts them and waits for each to empty, told by the
// pool tree ("notice": on cgroup v2 the kernel's cgroup.events, on v1 the
// exit of a query's process, on its pidfd) or polling each thread list
// ("poll", the notice hidden). Reported: the process's CPU time per second
// of waiting (in clock ticks of 10 ms, so ±2 ms/s) and the daemon's looks
// at query cgroups per second, over 5 s once the polls have backed off.
// On the host (v1) and in the VM (v2):
//
//	go test -run '^$' -bench IdleQueries -benchtime 1x ./internal/daemon
//	CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 go test -run '^$' -bench IdleQueries -benchtime 1x \
//		-exec "$PWD/scripts/vm/run.sh" ./internal/daemon
func BenchmarkIdleQueries(b *testing.B) {
	h := kerneltest.Require(b, bothModes)
	for _, mode := range []string{"notice", "poll"} {
		b.Run(mode, func(b *testing.B) {
			root := h.NewRoot(b, bothModes)
			host, err := pooltree.Open(h.Mounts, root.Path, cgroupfs.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { host.Close() })
			counted := &countedCgroups{Cgroups: host}
			var cg Cgroups = counted // hides NotifyEmpty: the daemon polls
			if mode == "notice" {
				cg = noticedCgroups{counted, host}
			}
			for range b.N {
				idleQueries(b, cg, counted, 200)
			}
		})
	}
}

// idleQueries places n sleeping processes in query cgroups, starts a
// daemon that adopts them, measures it waiting, then ends them and waits
// for the daemon to free every slot.
func idleQueries(b *testing.B, cg Cgroups, counted *countedCgroups, n int) {
	policy := policyOf(b, olapPool(-1, -1, ""))
	cfg := Config{Socket: socketDir(b) + "/agent.sock", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv, err := New(cfg, policy, cg, rootIdentity, &fixedLoad{})
	if err != nil {
		b.Fatal(err)
	}
	if err := cg.Apply(srv.rp.desired()); err != nil {
		b.Fatal(err)
	}
	ps, ok := srv.rp.poolState("olap")
	if !ok {
		b.Fatal("no pool olap in the plan")
	}
	var sleepers []*exec.Cmd
	b.Cleanup(func() {
		for _, c := range sleepers {
			c.Process.Kill()
			c.Wait()
		}
	})
	for i := range n {
		c := exec.Command("sleep", "600")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		sleepers = append(sleepers, c)
		name := fmt.Sprintf("qidle-%d", i)
		if err := cg.MakeQuery(ps, name); err != nil {
			b.Fatal(err)
		}
		if err := cg.MoveToQuery(ps, name, c.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
	d := serve(b, srv, srv.cfg.Socket)
	if p := d.pool(b, "olap"); p.Running != n {
		b.Fatalf("%d queries adopted, want %d", p.Running, n)
	}
	// Polls back off from 1 ms to their longest interval (2 s with the
	// notice) within 4.1 s.
	time.Sleep(4500 * time.Millisecond)
	const window = 5 * time.Second
	cpu0, looks0 := kerneltest.ProcessCPU(b, os.Getpid()), counted.looks.Load()
	time.Sleep(window)
	cpu, looks := kerneltest.ProcessCPU(b, os.Getpid())-cpu0, counted.looks.Load()-looks0
	b.ReportMetric(float64(cpu.Microseconds())/1000/window.Seconds(), "cpu-ms/s")
	b.ReportMetric(float64(looks)/window.Seconds(), "looks/s")
	for _, c := range sleepers {
		c.Process.Kill()
		c.Wait()
	}
	sleepers = nil
	waitFor(b, "every slot to be freed", func() bool { return d.pool(b, "olap").Running == 0 })
}

// countedCgroups counts the daemon's looks at query cgroups. As a Cgroups
// it has no NotifyEmpty, whatever it wraps.
type countedCgroups struct {
	Cgroups
	looks atomic.Int64
}

func (c *countedCgroups) Populated(pool, query string) (bool, error) {
	c.looks.Add(1)
	return c.Cgroups.Populated(pool, query)
}

// noticedCgroups is countedCgroups with the wrapped NotifyEmpty.
type noticedCgroups struct {
	*countedCgroups
	pooltree.EmptyNotifier
}
