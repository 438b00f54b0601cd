package daemon

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/metrics"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/state"
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
}

// Load reads the pool file and applies the persisted changes after it:
// the effective model. It writes nothing; an invalid file or a change that
// no longer applies is an error naming file:line:col.
func (src Sources) Load() (*planner.Model, []planner.Warning, error) {
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

// ErrNoState: a run-time change was sent to a daemon without a state
// directory, where it could not survive a restart.
var ErrNoState = errors.New("run-time changes need a state directory (poolagent daemon --state-dir)")

// operations is the daemon's operator-facing state: where the model comes
// from, the queries for `poolagent queries`, and what the metrics need
// besides the admission controller.
type operations struct {
	// mu serialises reloads and run-time changes.
	mu  sync.Mutex
	src *Sources

	// tmu guards sessions and predictor.
	tmu       sync.Mutex
	sessions  map[*session]*tracked
	predictor *metrics.Predictor

	waits sync.Map // pool name -> *metrics.WaitRecorder
}

// Operate gives the server the sources of its model, which enables Reload
// and run-time DDL (`poolagent sql`).
func (s *Server) Operate(src Sources) {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	s.ops.src = &src
}

// Model returns the pool model in force.
func (s *Server) Model() *planner.Model {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy.Model
}

// Reload re-reads the pool file and the persisted changes and, when they
// are valid, makes them the running model and reconciles the cgroups at
// once (only files whose value differs are written). When they are not,
// nothing changes: the running pools stay as they are and the error says
// why, with file:line:col.
func (s *Server) Reload() ([]planner.Warning, error) {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if s.ops.src == nil {
		return nil, errors.New("reload: the daemon was started without sources (Operate)")
	}
	m, warns, err := s.ops.src.Load()
	if err != nil {
		s.cfg.Log.Error("reload refused; the running pools are kept", "reason", err.Error())
		return nil, fmt.Errorf("reload refused, running pools kept: %w", err)
	}
	return warns, s.install(m, "reload")
}

// ExecSQL carries out DDL an administrator sent: parsed (source names it
// in positions), applied to the model in force all or nothing, written to
// the state directory, then made the running model and reconciled. When
// any statement is refused nothing is persisted or applied; when it cannot
// be persisted nothing is applied.
func (s *Server) ExecSQL(id admission.Identity, source, ddl string) (state.Change, []planner.Warning, error) {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if s.ops.src == nil || s.ops.src.Store == nil {
		return state.Change{}, nil, ErrNoState
	}
	stmts, err := planner.Parse(source, []byte(ddl))
	if err != nil {
		return state.Change{}, nil, err
	}
	if len(stmts) == 0 {
		return state.Change{}, nil, fmt.Errorf("%s: no statement (accepted: CREATE, ALTER, DROP RESOURCE POOL [CLASSIFIER], GRANT, REVOKE)", source)
	}
	m, warns, err := planner.Apply(s.Model(), stmts)
	if err != nil {
		return state.Change{}, warns, err
	}
	c, err := s.ops.src.Store.Append(state.Change{UID: id.UID, User: id.User, DDL: ddl})
	if err != nil {
		return state.Change{}, warns, fmt.Errorf("change not applied: %w", err)
	}
	s.cfg.Log.Info("run-time change accepted", "seq", c.Seq, "uid", id.UID, "user", id.User, "statements", len(stmts))
	return c, warns, s.install(m, fmt.Sprintf("change %d", c.Seq))
}

// install makes m the running model and reconciles; ops.mu is held.
func (s *Server) install(m *planner.Model, reason string) error {
	s.mu.Lock()
	p := s.policy
	s.mu.Unlock()
	p.Model = m
	s.SetPolicy(p)
	if err := s.plan(); err != nil {
		s.cfg.Log.Error("apply failed", "reason", reason, "err", err)
		return fmt.Errorf("%s accepted but not fully applied (the next re-plan retries): %w", reason, err)
	}
	s.cfg.Log.Info("model in force", "reason", reason, "pools", len(m.Pools()))
	return nil
}

// Status is the daemon's state in one line, for systemd's STATUS=.
func (s *Server) Status() string {
	var running, queued int
	pools := s.Pools()
	for _, p := range pools {
		running += p.Running
		queued += p.Queued
	}
	return fmt.Sprintf("%d pools, %d queries running, %d queued", len(pools), running, queued)
}
