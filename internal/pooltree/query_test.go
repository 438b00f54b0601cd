package pooltree

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// TestQueryCallsItsCgroup: every call of a Query goes to its own cgroup,
// and Move moves by the pool state Make made it with.
func TestQueryCallsItsCgroup(t *testing.T) {
	tree := &recordingTree{}
	q := NewQuery(tree, QueryKey{Pool: "olap", Name: "q1"})
	ps := planner.PoolState{Name: "olap"}
	ps.Weight = 7
	if err := q.Make(ps); err != nil {
		t.Fatal(err)
	}
	if err := q.Move(42); err != nil {
		t.Fatal(err)
	}
	q.Stat()
	q.Remove()
	q.Kill()
	q.Path()
	q.Populated()
	q.LimitsLeft(ps, 42)
	want := []string{"make olap/q1 7", "move olap/q1 7 42", "stat olap/q1", "remove olap/q1", "kill olap/q1",
		"path olap/q1", "populated olap/q1", "limits olap/q1 7 42"}
	if !slices.Equal(tree.calls, want) {
		t.Errorf("calls %q, want %q", tree.calls, want)
	}
	if got := q.Key().String(); got != "olap/q1" {
		t.Errorf("key %q, want olap/q1", got)
	}
}

// TestQueryWait: Wait returns once the cgroup is empty, with the read's
// error when it cannot be read, and with ctx's error when ctx ends first;
// with a notifier it watches before its first look and stops watching when
// it returns.
func TestQueryWait(t *testing.T) {
	readErr := errors.New("unreadable")
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tt := range map[string]struct {
		busy bool
		err  error
		ctx  context.Context
		want error
	}{
		"empty":      {ctx: context.Background()},
		"unreadable": {err: readErr, ctx: context.Background(), want: readErr},
		"ctx ended":  {busy: true, ctx: ended, want: context.Canceled},
	} {
		t.Run(name, func(t *testing.T) {
			tree := &notifyingTree{recordingTree: recordingTree{busy: tt.busy, err: tt.err}}
			err := NewQuery(tree, QueryKey{Pool: "olap", Name: "q1"}).Wait(tt.ctx)
			if !errors.Is(err, tt.want) {
				t.Errorf("Wait: %v, want %v", err, tt.want)
			}
			if tree.lookedFirst {
				t.Error("looked at the cgroup before watching it")
			}
			if tree.watching {
				t.Error("still watching after Wait returned")
			}
		})
	}
}

// TestQueryWaitLooks: with the notice, Wait looks at a busy cgroup at
// once and then every maxPollNotified, and after a Look that found it
// busy every firstPoll, doubling; without the notice it polls from
// firstPoll up to every maxPoll.
func TestQueryWaitLooks(t *testing.T) {
	looks := func(tree interface {
		QueryTree
		count() int
	}, look time.Duration, wait time.Duration) (before, after int) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			q := NewQuery(tree, QueryKey{Pool: "olap", Name: "q1"})
			done := make(chan error)
			go func() { done <- q.Wait(ctx) }()
			time.Sleep(look)
			synctest.Wait()
			before = tree.count()
			q.Look()
			time.Sleep(wait)
			synctest.Wait()
			after = tree.count() - before
			cancel()
			<-done
		})
		return before, after
	}
	notified := &notifyingTree{recordingTree: recordingTree{busy: true}}
	// At once, at 5 and at 10 minutes; then at once on the Look, and
	// 1+2+4+8 ms after it.
	if before, after := looks(notified, 10*time.Minute+time.Second, 15*time.Millisecond+time.Microsecond); before != 3 || after != 5 {
		t.Errorf("with the notice: %d looks in 10 minutes, want 3; %d in 15 ms after a Look, want 5", before, after)
	}
	plain := &recordingTree{busy: true}
	// At once, then at 1, 3, 7, 15, 31, 63, 127, 227, 327, ... ms: 14 by
	// 727 ms.
	if before, _ := looks(plain, 727*time.Millisecond+time.Microsecond, 0); before != 14 {
		t.Errorf("without the notice: %d looks in 727 ms, want 14", before)
	}
}

// recordingTree is a QueryTree that records its calls; its cgroup is
// busy, or cannot be read (err), as set.
type recordingTree struct {
	mu    sync.Mutex
	calls []string
	busy  bool
	err   error
}

func (r *recordingTree) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recordingTree) record(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recordingTree) MakeQuery(ps planner.PoolState, query string) error {
	r.record("make %s/%s %d", ps.Name, query, ps.Weight)
	return nil
}

func (r *recordingTree) MoveToQuery(ps planner.PoolState, query string, pid int) error {
	r.record("move %s/%s %d %d", ps.Name, query, ps.Weight, pid)
	return nil
}

func (r *recordingTree) LimitsLeft(ps planner.PoolState, query string, pid int) ([]observe.CgroupLimit, error) {
	r.record("limits %s/%s %d %d", ps.Name, query, ps.Weight, pid)
	return nil, nil
}

func (r *recordingTree) Populated(pool, query string) (bool, error) {
	r.record("populated %s/%s", pool, query)
	return r.busy, r.err
}

func (r *recordingTree) QueryStat(pool, query string) (observe.Sample, error) {
	r.record("stat %s/%s", pool, query)
	return observe.Sample{}, nil
}

func (r *recordingTree) RemoveQuery(pool, query string) error {
	r.record("remove %s/%s", pool, query)
	return nil
}

func (r *recordingTree) KillQuery(pool, query string) error {
	r.record("kill %s/%s", pool, query)
	return nil
}

func (r *recordingTree) QueryCgroup(pool, query string) (string, error) {
	r.record("path %s/%s", pool, query)
	return "/" + pool + "/" + query, nil
}

// notifyingTree is a recordingTree that is an EmptyNotifier.
type notifyingTree struct {
	recordingTree
	watching, lookedFirst bool
}

func (n *notifyingTree) NotifyEmpty(pool, query string, wake chan<- struct{}) (func(), error) {
	n.watching = true
	return func() { n.watching = false }, nil
}

func (n *notifyingTree) Populated(pool, query string) (bool, error) {
	if !n.watching {
		n.lookedFirst = true
	}
	return n.recordingTree.Populated(pool, query)
}
