package daemon

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/peer"
)

// TestHealthyLocks: a serving daemon is healthy; one whose plan or
// admission state stays locked past the health check's timeout is not,
// and the error names the lock.
func TestHealthyLocks(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{})
	if err := d.srv.Healthy(); err != nil {
		t.Fatalf("a serving daemon is unhealthy: %v", err)
	}
	for _, tc := range []struct {
		name string
		mu   *sync.Mutex
		want string
	}{
		{"plan", &d.srv.rp.mu, "the plan has been locked for over 100ms"},
		{"admission state", &d.srv.reg.mu, "the admission state has been locked for over 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.mu.Lock()
			err := d.srv.healthy(100 * time.Millisecond)
			tc.mu.Unlock()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("health with the %s locked: %v, want %q", tc.name, err, tc.want)
			}
			waitFor(t, "the daemon healthy again", func() bool { return d.srv.healthy(time.Second) == nil })
		})
	}
}
