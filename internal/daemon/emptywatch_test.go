package daemon

import (
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/pooltree"
)

// TestWaitEmptyWatchesFirst: a query cgroup's Wait registers for the kernel's notice
// before it first looks at the cgroup (so no change falls in between),
// wakes on the notice, and deregisters when it returns.
func TestWaitEmptyWatchesFirst(t *testing.T) {
	f := &notifyingCgroups{fakeCgroups: newFakeCgroups(t)}
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 0, "")), f, rootIdentity)
	done := make(chan error, 1)
	go func() {
		done <- pooltree.NewQuery(d.srv.cg, pooltree.QueryKey{Pool: "olap", Name: "q1"}).Wait(t.Context())
	}()
	waitFor(t, "the watch", func() bool { return f.watching() })
	f.notify()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the notice")
	}
	if f.watching() {
		t.Error("still watching after Wait returned")
	}
	if f.lookedBeforeWatch {
		t.Error("looked at the cgroup before watching it")
	}
}

// notifyingCgroups is a fake whose query cgroups stay populated until
// notify, and which gives the kernel's notice through NotifyEmpty.
type notifyingCgroups struct {
	*fakeCgroups
	mu                sync.Mutex
	wake              chan<- struct{}
	notified          bool
	lookedBeforeWatch bool
}

func (f *notifyingCgroups) NotifyEmpty(_, _ string, wake chan<- struct{}) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wake = wake
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.wake = nil
	}, nil
}

func (f *notifyingCgroups) Populated(string, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wake == nil && !f.notified {
		f.lookedBeforeWatch = true
	}
	return !f.notified, nil
}

func (f *notifyingCgroups) watching() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wake != nil
}

// notify empties the cgroups and gives the notice.
func (f *notifyingCgroups) notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notified = true
	select {
	case f.wake <- struct{}{}:
	default:
	}
}
