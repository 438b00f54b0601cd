package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/service"
	"github.com/poolagent/poolagent/internal/state"
)

// operated starts a daemon on a pool file with a state directory, both in
// a temporary directory, and returns it with the pool file's path.
func operated(t *testing.T, pools string, users peer.Users) (*testDaemon, *fakeCgroups, string, *state.Store) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "pools.sql")
	if err := os.WriteFile(file, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := state.Open(filepath.Join(dir, "state"), state.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	src := Sources{PoolFile: file, Store: store}
	m, _, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	p := policyOf(t, "")
	p.Model = m
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, p, cg, users)
	d.srv.Operate(src)
	return d, cg, file, store
}

func (f *fakeCgroups) applies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

// TestReload: an invalid pool file is refused with its position and the
// running pools are kept, with nothing applied; a valid one becomes the
// model and is applied once, at once.
func TestReload(t *testing.T) {
	d, cg, file, _ := operated(t, olapPool(2, 3, ""), peer.SystemUsers{})
	before := d.srv.changes.current().Model
	applies := cg.applies()

	if err := os.WriteFile(file, []byte(olapPool(2, 3, ", QUEUE_SIZ=4")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := d.srv.Reload()
	if err == nil || !strings.Contains(err.Error(), file+":1:") || !strings.Contains(err.Error(), "running pools kept") {
		t.Fatalf("reload of an invalid file: %v, want the refusal with %s:1:col", err, file)
	}
	if d.srv.changes.current().Model != before || cg.applies() != applies {
		t.Fatal("a refused reload changed the model or applied something")
	}

	if err := os.WriteFile(file, []byte(olapPool(5, 3, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if p := d.pool(t, "olap"); p.Limits.ConcurrentQueryLimit != 5 {
		t.Errorf("olap limit %d after reload, want 5", p.Limits.ConcurrentQueryLimit)
	}
	// CONCURRENT_QUERY_LIMIT changes no cgroup file: nothing to apply.
	if got := cg.applies(); got != applies {
		t.Errorf("reload that changes no cgroup value applied %d times", got-applies)
	}
	if err := os.WriteFile(file, []byte(olapPool(5, 3, ", TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := cg.applies(); got != applies+1 {
		t.Errorf("reload with a new CPU limit applied %d times, want once", got-applies)
	}
}

// oneUser answers every caller with one identity.
type oneUser admission.Identity

func (u oneUser) Identity(*unix.Ucred) (admission.Identity, error) { return admission.Identity(u), nil }

// TestSQL: an administrator's DDL is applied and persisted; invalid DDL is
// refused with source:line:col and nothing persisted; a user who is not an
// administrator is refused.
func TestSQL(t *testing.T) {
	d, _, _, store := operated(t, olapPool(2, 3, ""), peer.SystemUsers{})
	r, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpSQL, Source: "-e", SQL: "ALTER RESOURCE POOL olap SET (QUEUE_SIZE=9);"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Change == nil || r.Change.Seq != 1 {
		t.Fatalf("reply %+v, want change 1", r)
	}
	if p := d.pool(t, "olap"); p.Limits.QueueSize != 9 {
		t.Errorf("olap QUEUE_SIZE %d, want 9", p.Limits.QueueSize)
	}
	if got := store.Changes(); len(got) != 1 || got[0].UID != 0 || !strings.Contains(got[0].DDL, "QUEUE_SIZE=9") {
		t.Errorf("persisted %+v", got)
	}

	_, err = client.Ask(d.socket, protocol.Request{Op: protocol.OpSQL, Source: "change.sql", SQL: "ALTER RESOURCE POOL olap\n  SET (QUEUE_SIZE=-5);"})
	var refused *client.RefusedError
	if !errors.As(err, &refused) || refused.Code != protocol.CodeInvalidDDL || !strings.HasPrefix(refused.Message, "change.sql:2:") {
		t.Fatalf("invalid DDL: %v, want %s at change.sql:2:col", err, protocol.CodeInvalidDDL)
	}
	if len(store.Changes()) != 1 {
		t.Error("a refused change was persisted")
	}

	other, _, _, store2 := operated(t, olapPool(2, 3, ""), oneUser{UID: 1000, User: "alice"})
	_, err = client.Ask(other.socket, protocol.Request{Op: protocol.OpSQL, Source: "-e", SQL: "DROP RESOURCE POOL olap;"})
	if !errors.As(err, &refused) || refused.Code != protocol.CodeAccessDenied || !strings.Contains(refused.Message, "alice (uid 1000)") {
		t.Fatalf("non-administrator: %v, want %s naming alice", err, protocol.CodeAccessDenied)
	}
	if len(store2.Changes()) != 0 {
		t.Error("a refused user's change was persisted")
	}
}

// TestSQLSurvivesRestart: the change log is the model after a restart.
func TestSQLSurvivesRestart(t *testing.T) {
	d, _, file, store := operated(t, olapPool(2, 3, ""), peer.SystemUsers{})
	if _, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpSQL, Source: "-e", SQL: "CREATE RESOURCE POOL etl WITH (CONCURRENT_QUERY_LIMIT=1);"}); err != nil {
		t.Fatal(err)
	}
	m, _, err := Sources{PoolFile: file, Store: store}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Pool("etl"); !ok {
		t.Fatal("the created pool is not in the model loaded from the pool file and the state")
	}
}

// TestRunTimeChangesShown: the values a run-time change set over the pool
// file are marked in the pools view, and the daemon logs the changes it
// applies over the file at start and at reload.
func TestRunTimeChangesShown(t *testing.T) {
	d, _, file, store := operated(t, olapPool(2, 3, ""), peer.SystemUsers{})
	for _, ddl := range []string{"ALTER RESOURCE POOL olap SET (QUEUE_SIZE=100);", "CREATE RESOURCE POOL etl WITH (CONCURRENT_QUERY_LIMIT=1);"} {
		if _, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpSQL, Source: "-e", SQL: ddl}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpPools})
	if err != nil {
		t.Fatal(err)
	}
	marks := map[string][]string{}
	for _, p := range r.Pools {
		marks[p.Name] = p.RunTime
	}
	want := map[string][]string{"default": nil, "olap": {"QueueSize"}, "etl": {"Name"}}
	if !reflect.DeepEqual(marks, want) {
		t.Errorf("run-time marks %v, want %v", marks, want)
	}

	var log lockedBuffer
	m, _, err := Sources{PoolFile: file, Store: store}.Load()
	if err != nil {
		t.Fatal(err)
	}
	p := policyOf(t, "")
	p.Model = m
	restarted := startDaemon(t, Config{Log: slog.New(slog.NewTextHandler(&log, nil))}, p, newFakeCgroups(t), peer.SystemUsers{})
	restarted.srv.Operate(Sources{PoolFile: file, Store: store})
	if _, err := restarted.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"start", "reload"} {
		line := `msg="run-time changes applied over the pool file" at=` + at + ` count=2 log=` + store.Path() +
			` statements="#1 ALTER RESOURCE POOL olap SET (QUEUE_SIZE=100); #2 CREATE RESOURCE POOL etl WITH (CONCURRENT_QUERY_LIMIT=1);"`
		if !strings.Contains(log.String(), line) {
			t.Errorf("no log line\n%s\nin\n%s", line, log.String())
		}
	}
}

// TestViews reads the three views over the socket while one query runs
// and one waits.
func TestViews(t *testing.T) {
	d, _, _, _ := operated(t, olapPool(1, 3, "")+
		"CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='olap', MEMBER_NAME='all-users@well-known');\n", peer.SystemUsers{})
	running := startInProc(t, d.socket, "olap")
	waitFor(t, "the first query to start", running.isStarted)
	queued := startInProc(t, d.socket, "")
	waitFor(t, "the second query to queue", func() bool { return d.pool(t, "olap").Queued == 1 })

	r, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpPools})
	if err != nil {
		t.Fatal(err)
	}
	var olap protocol.Pool
	for _, p := range r.Pools {
		if p.Name == "olap" {
			olap = p
		}
	}
	if olap.ConcurrentQueryLimit != 1 || olap.RunningQueries != 1 || olap.QueuedQueries != 1 {
		t.Errorf("olap row %+v", olap)
	}
	r, err = client.Ask(d.socket, protocol.Request{Op: protocol.OpClassifiers})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Classifiers) != 1 || r.Classifiers[0].Rank != 1000 || r.Classifiers[0].ResourcePool != "olap" {
		t.Errorf("classifiers %+v", r.Classifiers)
	}
	r, err = client.Ask(d.socket, protocol.Request{Op: protocol.OpQueries})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Queries) != 2 {
		t.Fatalf("queries %+v, want one running and one queued", r.Queries)
	}
	run, wait := r.Queries[0], r.Queries[1]
	if run.State != protocol.StateRunning || run.User != "root" || run.ResourcePoolId != "olap" || run.ClientPid != os.Getpid() {
		t.Errorf("running row %+v", run)
	}
	if wait.State != protocol.StateQueued || wait.QueuePosition != 1 || wait.Classifier != "c" {
		t.Errorf("queued row %+v", wait)
	}
	running.release.Close()
	<-running.done
	waitFor(t, "the queued query to start", queued.isStarted)
	queued.release.Close()
	<-queued.done
}

// TestStopTellsQueuedClients: when the daemon stops, a queued client is
// told so, and so is one admitted that has not named its process yet (it
// does not hold up the stop); a running query goes on running.
func TestStopTellsQueuedClients(t *testing.T) {
	cg := newFakeCgroups(t)
	cfg := Config{Socket: filepath.Join(socketDir(t), "agent.sock"), LoadSample: 10 * time.Millisecond}
	srv, err := New(cfg, policyOf(t, olapPool(1, 3, "")), cg, peer.SystemUsers{}, &fixedLoad{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	waitFor(t, "the socket", func() bool {
		c, err := net.Dial("unix", cfg.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	running := startInProc(t, cfg.Socket, "olap")
	waitFor(t, "the first query to start", running.isStarted)
	queued := startInProc(t, cfg.Socket, "olap")
	waitFor(t, "the second query to queue", func() bool { return srv.reg.pools()[1].Queued == 1 })
	admitted := dialRaw(t, cfg.Socket)
	admitted.send(t, protocol.Request{Op: protocol.OpRun})
	if r := admitted.recv(t); r.Type != protocol.ReplyAdmitted {
		t.Fatalf("reply %+v, want admitted", r)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the daemon did not stop while a client was admitted but had not started")
	}
	<-queued.done
	var refused *client.RefusedError
	if !errors.As(queued.err, &refused) || refused.Code != protocol.CodeStopping {
		t.Fatalf("queued client: %v, want %s", queued.err, protocol.CodeStopping)
	}
	if r := admitted.recv(t); r.Type != protocol.ReplyError || r.Code != protocol.CodeStopping {
		t.Fatalf("admitted client: reply %+v, want %s", r, protocol.CodeStopping)
	}
	select {
	case <-running.done:
		t.Fatal("the running query ended when the daemon stopped")
	case <-time.After(50 * time.Millisecond):
	}
	running.release.Close()
	<-running.done
	if running.err != nil || running.res.ExitCode != 0 {
		t.Errorf("running query after the stop: exit %d, %v", running.res.ExitCode, running.err)
	}
}

// TestRunServiceNotifiesAndReloads drives service.Run as systemd would: a
// notify socket, SIGHUP with an invalid file (refused, said in STATUS=),
// SIGHUP with a valid one, then SIGTERM.
func TestRunServiceNotifiesAndReloads(t *testing.T) {
	notifyPath := filepath.Join(t.TempDir(), "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	t.Setenv("NOTIFY_SOCKET", notifyPath)
	recv := func() string {
		t.Helper()
		notify.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		n, err := notify.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "pools.sql")
	if err := os.WriteFile(file, []byte(olapPool(2, 3, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	src := Sources{PoolFile: file}
	m, _, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	p := policyOf(t, "")
	p.Model = m
	cfg := Config{Socket: filepath.Join(socketDir(t), "agent.sock"), LoadSample: 10 * time.Millisecond}
	srv, err := New(cfg, p, newFakeCgroups(t), peer.SystemUsers{}, &fixedLoad{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Operate(src)
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- service.Run(context.Background(), srv, service.Options{Signals: sigs}) }()

	if got := recv(); got != "READY=1\nSTATUS=2 pools, 0 queries running, 0 queued" {
		t.Fatalf("first notification %q", got)
	}
	if c, err := net.Dial("unix", cfg.Socket); err != nil {
		t.Fatalf("READY=1 before the socket accepts clients: %v", err)
	} else {
		c.Close()
	}

	os.WriteFile(file, []byte("CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=-7);"), 0o644)
	sigs <- syscall.SIGHUP
	if got := recv(); got != "RELOADING=1" {
		t.Fatalf("notification %q, want RELOADING=1", got)
	}
	if got := recv(); !strings.HasPrefix(got, "READY=1\nSTATUS=reload refused, running pools kept: ") || !strings.Contains(got, file+":1:") {
		t.Fatalf("after an invalid reload %q", got)
	}
	if _, ok := srv.changes.current().Model.Pool("olap"); !ok {
		t.Fatal("the refused reload dropped olap")
	}

	os.WriteFile(file, []byte(olapPool(2, 3, "")+"CREATE RESOURCE POOL etl WITH (CONCURRENT_QUERY_LIMIT=1);"), 0o644)
	sigs <- syscall.SIGHUP
	recv()
	if got := recv(); got != "READY=1\nSTATUS=reloaded: 3 pools, 0 queries running, 0 queued" {
		t.Fatalf("after a valid reload %q", got)
	}

	sigs <- syscall.SIGTERM
	if got := recv(); !strings.HasPrefix(got, "STOPPING=1\nSTATUS=stopping on terminated") {
		t.Fatalf("on SIGTERM %q", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMetricsSnapshot: the metrics source gives each pool's admission
// state and its wait histogram.
func TestMetricsSnapshot(t *testing.T) {
	d, _, _, _ := operated(t, olapPool(1, 3, ""), peer.SystemUsers{})
	c := startInProc(t, d.socket, "olap")
	waitFor(t, "the query to start", c.isStarted)
	snap, err := d.srv.MetricsSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range snap.Pools {
		if p.Name == "olap" {
			found = true
			if p.Running != 1 || p.Admitted != 1 || p.ConcurrentQueryLimit != 1 || p.QueueWait.Count != 1 {
				t.Errorf("olap %+v", p)
			}
		}
	}
	if !found || snap.Host.CPUs != 2 {
		t.Errorf("snapshot %+v", snap)
	}
	c.release.Close()
	<-c.done
}

// TestReleaseNode: releasing a fleet node's strict slots is refused to a
// user who is not an administrator, and on a daemon that is not in fleet
// mode says so.
func TestReleaseNode(t *testing.T) {
	d, _, _, _ := operated(t, olapPool(2, 3, ""), peer.SystemUsers{})
	_, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpReleaseNode, Node: "n2"})
	var refused *client.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "not in fleet mode") {
		t.Fatalf("single host: %v, want a refusal saying it is not in fleet mode", err)
	}
	other, _, _, _ := operated(t, olapPool(2, 3, ""), oneUser{UID: 1000, User: "alice"})
	_, err = client.Ask(other.socket, protocol.Request{Op: protocol.OpReleaseNode, Node: "n2"})
	if !errors.As(err, &refused) || refused.Code != protocol.CodeAccessDenied || !strings.Contains(refused.Message, "alice (uid 1000)") {
		t.Fatalf("non-administrator: %v, want %s naming alice", err, protocol.CodeAccessDenied)
	}
}

// TestKillQuery: an administrator's kill names a running query by its id
// and kills its cgroup; a queued query, an unknown id and a caller who is
// not an administrator are refused, saying why.
func TestKillQuery(t *testing.T) {
	d, cg, _, _ := operated(t, olapPool(1, 3, ""), peer.SystemUsers{})
	running := startInProc(t, d.socket, "olap")
	waitFor(t, "the query to start", running.isStarted)
	queued := startInProc(t, d.socket, "olap")
	waitFor(t, "a query to queue", func() bool { return d.pool(t, "olap").Queued == 1 })
	ids := map[string]string{}
	for _, r := range d.srv.views.queryRows() {
		ids[r.State] = r.QueryId
	}
	var refused *client.RefusedError
	for name, tt := range map[string]struct{ query, want string }{
		"unknown": {"q-none", `no running query "q-none" on this node`},
		"queued":  {ids[protocol.StateQueued], "is queued, not running"},
	} {
		if _, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpKill, Query: tt.query}); !errors.As(err, &refused) || !strings.Contains(refused.Message, tt.want) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, tt.want)
		}
	}
	r, err := client.Ask(d.socket, protocol.Request{Op: protocol.OpKill, Query: ids[protocol.StateRunning]})
	if err != nil || r.Killed != "olap" {
		t.Fatalf("kill of the running query: %+v, %v", r, err)
	}
	cg.mu.Lock()
	killed := slices.Clone(cg.killed)
	cg.mu.Unlock()
	if !slices.Equal(killed, []string{"olap/" + ids[protocol.StateRunning]}) {
		t.Errorf("killed %v, want the running query's cgroup", killed)
	}
	other, _, _, _ := operated(t, olapPool(2, 3, ""), oneUser{UID: 1000, User: "alice"})
	_, err = client.Ask(other.socket, protocol.Request{Op: protocol.OpKill, Query: "q"})
	if !errors.As(err, &refused) || refused.Code != protocol.CodeAccessDenied || !strings.Contains(refused.Message, "may not kill a query") {
		t.Errorf("non-administrator: %v, want %s", err, protocol.CodeAccessDenied)
	}
	running.release.Close()
	queued.release.Close()
}

// TestEndBoundKillsAtOnce: the processes of a bound query whose client
// is gone are killed by the query cgroup's one kill (cgroup.kill, else
// freezing and signalling: TestKernelKillWhileForking), not signalled one
// by one, so that no child forked meanwhile survives; a query whose
// cgroup is already gone is nothing to kill.
func TestEndBoundKillsAtOnce(t *testing.T) {
	d, cg, _, _ := operated(t, olapPool(1, 3, ""), peer.SystemUsers{})
	running := startInProc(t, d.socket, "olap")
	waitFor(t, "the query to start", running.isStarted)
	rows := d.srv.views.queryRows()
	if len(rows) != 1 {
		t.Fatalf("queries %+v, want the one running", rows)
	}
	for _, name := range []string{rows[0].QueryId, "gone"} {
		d.srv.endBound(&query{queryView: queryView{pool: "olap", name: name}, cg: pooltree.NewQuery(cg, pooltree.QueryKey{Pool: "olap", Name: name})})
	}
	cg.mu.Lock()
	killed := slices.Clone(cg.killed)
	cg.mu.Unlock()
	if !slices.Equal(killed, []string{"olap/" + rows[0].QueryId}) {
		t.Errorf("killed %v, want the bound query's cgroup", killed)
	}
	running.release.Close()
}
