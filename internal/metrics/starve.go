package metrics

import (
	"sync"
	"time"
)

// StarvedBelow is the share of one CPU under which a pool with running
// queries counts as starved: an idle pool (cpu.idle 1) beside a busy
// normal one gets about 3/1027 of a CPU, 0.3%, from the idle weight.
const StarvedBelow = 0.01

// Starvation keeps, per pool, the wall time of the intervals between
// calls to [Starvation.Step] in which the pool had queries running at
// both ends and used less than [StarvedBelow] of one CPU: queries that
// were admitted but made no progress, as an idle pool's do while the
// other pools keep the CPUs busy. Safe for concurrent use.
type Starvation struct {
	mu    sync.Mutex
	last  map[string]starveMark
	total map[string]time.Duration
}

type starveMark struct {
	at        time.Time
	running   int
	usageUsec uint64
}

// NewStarvation returns a Starvation with no history.
func NewStarvation() *Starvation {
	return &Starvation{last: map[string]starveMark{}, total: map[string]time.Duration{}}
}

// Step closes, for every pool in pools, the interval since its previous
// sample at the sample's At (their Running and CPU.UsageUsec): one read
// at the same time as the last adds nothing. Pools missing from pools are
// forgotten.
func (s *Starvation) Step(pools []PoolSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(pools))
	for _, p := range pools {
		seen[p.Name] = true
		prev, ok := s.last[p.Name]
		s.last[p.Name] = starveMark{at: p.At, running: p.Running, usageUsec: p.CPU.UsageUsec}
		wall := p.At.Sub(prev.at)
		if !ok || wall <= 0 || prev.running == 0 || p.Running == 0 || p.CPU.UsageUsec < prev.usageUsec {
			continue
		}
		if float64(p.CPU.UsageUsec-prev.usageUsec) < StarvedBelow*float64(wall.Microseconds()) {
			s.total[p.Name] += wall
		}
	}
	for name := range s.last {
		if !seen[name] {
			delete(s.last, name)
			delete(s.total, name)
		}
	}
}

// Starved returns pool's starved time so far.
func (s *Starvation) Starved(pool string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total[pool]
}
