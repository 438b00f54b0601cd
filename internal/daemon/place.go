package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/planner"
)

// ErrConfined: the process is held by a CPU or memory limit, or a CPU
// demotion, that its query cgroup would not be below, and Config.MayLeave
// does not allow leaving it.
var ErrConfined = errors.New("held by a limit the query would leave")

// place moves p.Target into q's cgroup, made with the limits q's pool
// has in the plan, and returns that pool state. The process is held while
// it is checked and moved (peer.Checker.Hold). The cgroup is made holding
// the plan lock (replanner.withPool), after the confinement check, so
// that its limits are its pool's as the plan has them: on cgroup v1 the
// kernel refuses a query quota above a pool quota a re-plan had lowered.
// The move (a write to cgroup.procs, which on v1 waits for the kernel's
// cgroup lock) and the hold happen outside the plan lock: letting go of a
// process that does not stop (one sitting in vfork()) takes up to a
// second, which must not hold up other users' starts, re-plans, reloads
// or reconciles. A re-plan in between leaves the empty cgroup
// (pooltree.Query.Make); a drop of the pool removes it, and the query fails
// as dropped.
func (q *query) place(p peer.Placement) (planner.PoolState, error) {
	s := q.s
	var ps planner.PoolState
	err := s.procs.Hold(p, func(pid int) error {
		found, err := s.rp.withPool(q.pool, func(cur planner.PoolState) error {
			ps = cur
			if err := s.confined(pid, cur, q.cg); err != nil {
				return err
			}
			return q.cg.Make(cur)
		})
		if !found {
			return dropped(q.pool)
		}
		if err != nil {
			return err
		}
		if s.cfg.beforeMove != nil {
			s.cfg.beforeMove(pid)
		}
		err = q.cg.Move(pid)
		if _, ok := s.rp.poolState(q.pool); err != nil && !ok {
			return fmt.Errorf("%w: %w", dropped(q.pool), err)
		}
		return err
	})
	return ps, err
}

// confined refuses to move process pid out of a CPU or memory limit, or
// out of a CPU demotion (cpu.idle, a weight below the default) into a pool
// of a higher weight: one on a cgroup holding the process that the query
// cgroup would not be below, unless Config.MayLeave allows that cgroup.
// Moving such a process would free it from what an administrator set for
// it (a user's session capped at 10%, or made idle, would run uncapped in
// the default pool), or from the caps of the query it runs in, and root's
// write to cgroup.procs is not refused by the kernel.
func (s *Server) confined(pid int, ps planner.PoolState, cg *pooltree.Query) error {
	limits, err := cg.LimitsLeft(ps, pid)
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
			"which a query in pool %s would leave, so it stays where it is",
			ErrConfined, pid, l.Cgroup, l.File, l.Value, what, ps.Name)
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
