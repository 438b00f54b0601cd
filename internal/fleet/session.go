package fleet

import (
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// session is the node's lease in the cluster and what the node knows of
// its connection to etcd: whether the lease is certainly alive, how the
// latest request went.
//
// Lock order: session.mu is taken alone or while the pipeline's lock is
// held (never while the cluster view's is), and nothing is locked,
// called back or asked of etcd while it is held.
type session struct {
	mu    sync.Mutex
	lease clientv3.LeaseID // 0 while the node has no session
	// aliveUntil is when the lease expires at the earliest: a TTL after
	// the last answered renewal was sent (see connected).
	aliveUntil time.Time
	// health holds the fields of Health the session owns: Lease,
	// Sessions, LastRoundTrip and LastError.
	health Health
}

// current returns the lease, 0 when the node has none, and whether it is
// certainly alive at now: renewed less than a TTL ago, counted from when
// the renewal was sent.
func (s *session) current(now time.Time) (clientv3.LeaseID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease, s.lease != 0 && now.Before(s.aliveUntil)
}

// id is the lease, 0 when the node has none.
func (s *session) id() clientv3.LeaseID {
	lease, _ := s.current(time.Time{})
	return lease
}

// connected reports whether the lease is certainly alive at now.
func (s *session) connected(now time.Time) bool {
	_, live := s.current(now)
	return live
}

// begin takes lease, granted by a request sent at start, alive until
// until.
func (s *session) begin(lease clientv3.LeaseID, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lease, s.aliveUntil = lease, until
	s.health.Lease = int64(lease)
	s.health.Sessions++
}

// renewed records that lease, if it is still the node's, is alive until
// until.
func (s *session) renewed(lease clientv3.LeaseID, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == lease {
		s.aliveUntil = until
	}
}

// end forgets lease, gone in etcd; false when the node holds another one
// by now (or none).
func (s *session) end(lease clientv3.LeaseID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != lease {
		return false
	}
	s.lease = 0
	return true
}

// note records a request's outcome, sent at start, for Health.
func (s *session) note(start time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.health.LastError = err.Error()
		return
	}
	s.health.LastRoundTrip = time.Since(start)
	s.health.LastError = ""
}

// failing reports whether the latest request failed.
func (s *session) failing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health.LastError != ""
}

// state is the session's part of Health at now.
func (s *session) state(now time.Time) Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.health
	h.Connected = s.lease != 0 && now.Before(s.aliveUntil)
	return h
}
