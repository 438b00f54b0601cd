package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/poolagent/poolagent/peer"
	"github.com/poolagent/poolagent/planner"
)

// ErrConfined: the process is held by a CPU or memory limit, or a CPU
// demotion, that its query cgroup would not be below, and Config.MayLeave
// does not allow leaving it.
var ErrConfined = errors.New("held by a limit the query would leave")

// place creates the query cgroup and moves p.Target into it, holding the
// process while it is checked and moved (peer.Checker.Hold), unless it is
// confined.
func (s *Server) place(p peer.Placement, ps planner.PoolState, query string) error {
	return s.procs.Hold(p, func(pid int) error {
		if err := s.confined(pid, ps, query); err != nil {
			return err
		}
		if s.cfg.beforeMove != nil {
			s.cfg.beforeMove(pid)
		}
		return s.cg.PlaceQuery(ps, query, pid)
	})
}

// confined refuses to move process pid out of a CPU or memory limit, or
// out of a CPU demotion (cpu.idle, a weight below the default) into a pool
// of a higher weight: one on a cgroup holding the process that the query
// cgroup would not be below, unless Config.MayLeave allows that cgroup.
// Moving such a process would free it from what an administrator set for
// it (a user's session capped at 10%, or made idle, would run uncapped in
// the default pool), or from the caps of the query it runs in, and root's
// write to cgroup.procs is not refused by the kernel.
func (s *Server) confined(pid int, ps planner.PoolState, query string) error {
	limits, err := s.cg.LimitsLeft(ps, query, pid)
	if err != nil {
		return err
	}
	for _, l := range limits {
		if mayLeave(s.cfg.MayLeave, l.Cgroup) {
			continue
		}
		what := fmt.Sprintf("%.3g vCPU", l.CPUs)
		switch {
		case l.MemoryBytes > 0:
			what = fmt.Sprintf("%d bytes", l.MemoryBytes)
		case l.Weight > 0:
			what = fmt.Sprintf("a CPU weight of %.3g, below pool %s's %.3g", l.Weight, ps.Name, ps.Pool.CPU.SchedWeight())
		}
		return fmt.Errorf("%w: process %d is in cgroup %s, limited by its %s %s (%s), "+
			"which a query in pool %s would leave, so it stays where it is; "+
			"an administrator may allow queries to leave that cgroup's limits: poolagent daemon --may-leave %s",
			ErrConfined, pid, l.Cgroup, l.File, l.Value, what, ps.Name, l.Cgroup)
	}
	return nil
}

// mayLeave reports whether cgroup is one of allowed or below one.
func mayLeave(allowed []string, cgroup string) bool {
	for _, a := range allowed {
		if a == "/" || cgroup == a || strings.HasPrefix(cgroup, a+"/") {
			return true
		}
	}
	return false
}
