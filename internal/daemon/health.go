package daemon

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/poolagent/poolagent/internal/guard"
)

// healthTimeout bounds the health check's wait for the plan and the
// admission state.
const healthTimeout = 5 * time.Second

// Healthy reports whether every accept loop is at accept or has just left
// it (none stalled: see guard.Listener.Stalled), the pool root the daemon
// has open is still the one at its path, and the plan and the admission
// state can each be taken within healthTimeout: a daemon that stopped
// accepting, writes below a removed pool root (where every placement
// fails), or is stuck holding a lock every start needs fails it, so its
// watchdog is not fed and systemd restarts it.
func (s *Server) Healthy() error { return s.healthy(healthTimeout) }

// healthy is Healthy waiting up to timeout for the locks.
func (s *Server) healthy(timeout time.Duration) error {
	now := time.Now()
	var stalled error
	s.loops.Range(func(k, _ any) bool {
		stalled = k.(*guard.Listener).Stalled(now)
		return stalled == nil
	})
	if stalled != nil {
		return stalled
	}
	if rw, ok := s.cg.(rootWatcher); ok {
		if err := rw.RootInPlace(); err != nil {
			return fmt.Errorf("%w; a restart of the daemon makes it again", err)
		}
	}
	// One after the other, not nested: the plan (replanner.mu), then the
	// admission state (registry.mu).
	var planTaken atomic.Bool
	done := make(chan struct{})
	go func() {
		s.rp.mu.Lock()
		s.rp.mu.Unlock()
		planTaken.Store(true)
		s.reg.mu.Lock()
		s.reg.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		if !planTaken.Load() {
			return fmt.Errorf("the plan has been locked for over %s", timeout)
		}
		return fmt.Errorf("the admission state has been locked for over %s", timeout)
	}
}
