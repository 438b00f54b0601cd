package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/poolagent/poolagent/internal/guard"
)

// healthTimeout bounds the health check's wait for the admission state.
const healthTimeout = 5 * time.Second

// Healthy reports whether every accept loop is at accept or has just left
// it (none stalled: see guard.Listener.Stalled), the admission state can
// be taken within healthTimeout, and the pool root it has open is still
// the one at its path: a daemon that stopped accepting, is stuck holding
// the state, or writes below a removed pool root (where every placement
// fails) fails it, so its watchdog is not fed and systemd restarts it.
func (s *Server) Healthy() error {
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
	done := make(chan struct{})
	go func() {
		s.reg.mu.Lock()
		s.reg.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(healthTimeout):
		return errors.New("the admission state has been locked for over 5s")
	}
}
