package daemon

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// TestWhyQueued: a queued client's progress line and the queries view say
// why each queued query waits: the head for the running set (1 of 1), the
// one behind it for the head; and the line follows a change of reason.
func TestWhyQueued(t *testing.T) {
	d := startDaemon(t, Config{Progress: 10 * time.Millisecond}, policyOf(t, olapPool(1, 5, "")), newFakeCgroups(t), peer.SystemUsers{})
	runner := startInProc(t, d.socket, "olap")
	waitFor(t, "runner to start", runner.isStarted)
	head := startInProc(t, d.socket, "olap")
	// Queued before the next arrives, so the next is second in the queue.
	waitFor(t, "the head to queue", func() bool { return d.pool(t, "olap").Queued == 1 })
	var progress lockedBuffer
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		_, err := client.Run(client.RunOptions{Socket: d.socket, Pool: "olap", Args: []string{"true"},
			Env: os.Environ(), Progress: &progress, Signals: sigs, Name: "poolagent-run"})
		done <- err
	}()
	waitFor(t, "the second queued query's progress line", func() bool {
		return strings.Contains(progress.String(), "position 2, waited") &&
			strings.HasSuffix(progress.String(), ": behind 1; head: 1 of 1 running")
	})

	r, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpQueries})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]protocol.Wait{
		1: {Reason: protocol.WaitConcurrency, HeadReason: protocol.WaitConcurrency, Running: 1, Limit: 1, ThresholdPercent: -1,
			UserRunning: 1, UserLimit: -1},
		2: {Reason: protocol.WaitBehindHead, Ahead: 1, HeadReason: protocol.WaitConcurrency, Running: 1, Limit: 1, ThresholdPercent: -1,
			UserRunning: 1, UserLimit: -1, OwnAhead: 1},
	}
	queued := 0
	for _, q := range r.Queries {
		if q.State != protocol.StateQueued {
			if q.Wait != nil {
				t.Errorf("running query %s has a wait reason %+v", q.QueryId, q.Wait)
			}
			continue
		}
		queued++
		if q.Wait == nil || *q.Wait != want[q.QueuePosition] {
			t.Errorf("queued query at %d: wait %+v, want %+v", q.QueuePosition, q.Wait, want[q.QueuePosition])
		}
	}
	if queued != 2 {
		t.Fatalf("queries %+v: want 2 queued", r.Queries)
	}

	// The runner ends: the head runs, and the last query is the head now.
	runner.release.Close()
	waitFor(t, "the head to start", head.isStarted)
	waitFor(t, "the progress line to follow", func() bool {
		return strings.HasSuffix(progress.String(), "position 1, waited "+lastWaited(progress.String())+": 1 of 1 running")
	})
	head.release.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// lastWaited is the time shown in the last progress line drawn.
func lastWaited(s string) string {
	i := strings.LastIndex(s, "waited ")
	if i < 0 {
		return ""
	}
	rest := s[i+len("waited "):]
	end, _, _ := strings.Cut(rest, ":")
	return end
}
