package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/state"
	"github.com/poolagent/poolagent/planner"
)

// Sources is where the daemon's pool model comes from: the pool file, then
// the run-time changes persisted in the state directory, applied in order
// (docs/operate.md). A reload and `poolagent sql` go through it.
type Sources struct {
	// PoolFile is the DDL file given with --pools.
	PoolFile string
	// Store holds the accepted run-time changes; nil refuses run-time
	// changes (the daemon has no state directory).
	Store *state.Store
	// Shared, when set, is where the model comes from instead: pool
	// definitions shared by every daemon of a cluster (fleet mode).
	Shared SharedDefinitions
}

// SharedDefinitions are pool definitions kept outside the host and shared
// by many daemons: reloads read them, a run-time change is written to them
// all or nothing (refused when another change came in between).
type SharedDefinitions interface {
	Load() (*planner.Model, []planner.Warning, error)
	// Change applies c's statements (apply) to the definitions as they
	// are now, writes them with c, and returns the model after it and c
	// as recorded.
	Change(c state.Change, apply func(*planner.Model) (*planner.Model, []planner.Warning, error)) (*planner.Model, state.Change, []planner.Warning, error)
	// Status says where the definitions in force come from, for STATUS=.
	Status() string
	// Where names where a change is saved, for the administrator who
	// made it ("cluster NAME in etcd").
	Where() string
}

// savedIn says where a run-time change is saved.
func (src *Sources) savedIn() string {
	if src != nil && src.Shared != nil {
		return src.Shared.Where()
	}
	return "the daemon's state directory"
}

// Load reads the pool file and applies the persisted changes after it:
// the effective model. It writes nothing; an invalid file or a change that
// no longer applies is an error naming file:line:col.
func (src Sources) Load() (*planner.Model, []planner.Warning, error) {
	if src.Shared != nil {
		return src.Shared.Load()
	}
	data, err := os.ReadFile(src.PoolFile)
	if err != nil {
		return nil, nil, fmt.Errorf("read pool file: %w", err)
	}
	var changes []state.Change
	var logPath string
	if src.Store != nil {
		changes, logPath = src.Store.Changes(), src.Store.Path()
	}
	return state.Effective(src.PoolFile, data, logPath, changes)
}

// fileModel is the pool file's model alone, without the run-time changes:
// what `poolagent pools` compares the model in force with, to mark the
// values a change set. nil without a state directory, in fleet mode (the
// definitions are shared), or when the file cannot be read now.
func (src Sources) fileModel() *planner.Model {
	if src.Shared != nil || src.Store == nil {
		return nil
	}
	data, err := os.ReadFile(src.PoolFile)
	if err != nil {
		return nil
	}
	m, _, err := planner.Load(src.PoolFile, data)
	if err != nil {
		return nil
	}
	return m
}

// logChanges says which run-time changes from the state directory the
// model in force applies over the pool file (at "start" or "reload"), so
// that an operator who edited the file sees why a value differs from it.
func (src Sources) logChanges(log *slog.Logger, at string) {
	if src.Shared != nil || src.Store == nil {
		return
	}
	changes := src.Store.Changes()
	if len(changes) == 0 {
		return
	}
	stmts := make([]string, len(changes))
	for i, c := range changes {
		stmts[i] = fmt.Sprintf("#%d %s", c.Seq, strings.Join(strings.Fields(c.DDL), " "))
	}
	log.Info("run-time changes applied over the pool file", "at", at, "count", len(changes),
		"log", src.Store.Path(), "statements", strings.Join(stmts, " "))
}

// ErrNoState: a run-time change was sent to a daemon without a state
// directory, where it could not survive a restart.
var ErrNoState = errors.New("run-time changes need a state directory (poolagent daemon --state-dir)")

// changes is the daemon's run-time changes: where the model comes from,
// and reloads and `poolagent sql`, one at a time, each of which installs a
// new policy in the registry and the replanner (which holds the policy in
// force). Its lock is "ops" in the lock order (see Server): a change holds
// it while it installs the new policy and re-plans.
type changes struct {
	log *slog.Logger
	reg *registry
	rp  *replanner

	// file is the pool file's model without the run-time changes
	// (Sources.fileModel), readable without the lock.
	file atomic.Pointer[planner.Model]

	mu  sync.Mutex
	src *Sources
}

// current returns the policy in force.
func (c *changes) current() Policy { return c.rp.policy() }

// set makes p the policy in force: its limits apply at once and the pools
// are re-planned soon.
func (c *changes) set(p Policy) {
	c.rp.setPolicy(p)
	c.reg.configure(p)
	c.rp.request()
}

// Operate gives the server the sources of its model, which enables Reload
// and run-time DDL (`poolagent sql`).
func (s *Server) Operate(src Sources) {
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	s.changes.src = &src
	s.changes.file.Store(src.fileModel())
	src.logChanges(s.cfg.Log, "start")
}

// Reload re-reads the pool file and the persisted changes and, when they
// are valid, makes them the running model and reconciles the cgroups at
// once (only files whose value differs are written). When they are not,
// nothing changes: the running pools stay as they are and the error says
// why, with file:line:col.
//
// Either way the pool tree is then compared with the plan in force and
// what differs is written, even when the plan did not change: a reload is
// how an operator repairs a tree another writer changed.
func (s *Server) Reload() ([]planner.Warning, error) {
	warns, err := s.changes.reload()
	if rerr := s.rp.reconcile(true); rerr != nil {
		s.cfg.Log.Error("reload", "err", rerr)
		if err == nil {
			err = rerr
		}
	}
	return warns, err
}

func (c *changes) reload() ([]planner.Warning, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil {
		return nil, errors.New("reload: the daemon was started without sources (Operate)")
	}
	m, warns, err := c.src.Load()
	if err != nil {
		c.log.Error("reload refused; the running pools are kept", "reason", err.Error())
		return nil, fmt.Errorf("reload refused, running pools kept: %w", err)
	}
	c.file.Store(c.src.fileModel())
	c.src.logChanges(c.log, "reload")
	return warns, c.installLocked(m, "reload")
}

// execSQL carries out DDL an administrator sent: parsed (source names it
// in positions), applied to the model in force all or nothing, written to
// the state directory, then made the running model and reconciled. When
// any statement is refused nothing is persisted or applied; when it cannot
// be persisted nothing is applied.
func (c *changes) execSQL(id admission.Identity, source, ddl string) (state.Change, []planner.Warning, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil || c.src.Store == nil && c.src.Shared == nil {
		return state.Change{}, nil, ErrNoState
	}
	stmts, err := planner.Parse(source, []byte(ddl))
	if err != nil {
		return state.Change{}, nil, err
	}
	if len(stmts) == 0 {
		return state.Change{}, nil, fmt.Errorf("%s: no statement (accepted: CREATE, ALTER, DROP RESOURCE POOL [CLASSIFIER], GRANT, REVOKE)", source)
	}
	if c.src.Shared != nil {
		m, ch, warns, err := c.src.Shared.Change(state.Change{UID: id.UID, User: id.User, DDL: ddl},
			func(m *planner.Model) (*planner.Model, []planner.Warning, error) { return planner.Apply(m, stmts) })
		if err != nil {
			return state.Change{}, warns, err
		}
		c.log.Info("run-time change written to the cluster", "seq", ch.Seq, "uid", id.UID, "user", id.User, "statements", len(stmts))
		return ch, warns, c.installLocked(m, fmt.Sprintf("cluster change %d", ch.Seq))
	}
	m, warns, err := planner.Apply(c.current().Model, stmts)
	if err != nil {
		return state.Change{}, warns, err
	}
	ch, err := c.src.Store.Append(state.Change{UID: id.UID, User: id.User, DDL: ddl})
	if err != nil {
		return state.Change{}, warns, fmt.Errorf("change not applied: %w", err)
	}
	c.log.Info("run-time change accepted", "seq", ch.Seq, "uid", id.UID, "user", id.User, "statements", len(stmts))
	return ch, warns, c.installLocked(m, fmt.Sprintf("change %d", ch.Seq))
}

// installLocked makes m the running model and reconciles; c.mu is held.
func (c *changes) installLocked(m *planner.Model, reason string) error {
	p := c.current()
	p.Model = m
	c.set(p)
	if err := c.rp.plan(); err != nil {
		c.log.Error("apply failed", "reason", reason, "err", err)
		return fmt.Errorf("%s accepted but not fully applied (the next re-plan retries): %w", reason, err)
	}
	c.log.Info("model in force", "reason", reason, "pools", len(m.Pools()))
	return nil
}

// Status is the daemon's state in one line, for systemd's STATUS=.
func (s *Server) Status() string {
	var running, queued int
	pools := s.reg.pools()
	for _, p := range pools {
		running += p.Running
		queued += p.Queued
	}
	line := fmt.Sprintf("%d pools, %d queries running, %d queued", len(pools), running, queued)
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	if s.changes.src != nil && s.changes.src.Shared != nil {
		line += "; " + s.changes.src.Shared.Status()
	}
	return line
}
