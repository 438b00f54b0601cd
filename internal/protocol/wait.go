package protocol

import (
	"strconv"
	"strings"
)

// Why a queued query is not running: the Reason and HeadReason of a
// [Wait] (the daemon's admission.Wait* rules, docs/admission.md).
const (
	// WaitConcurrency: the pool runs CONCURRENT_QUERY_LIMIT queries.
	WaitConcurrency = "concurrency"
	// WaitLoad: load + reservations is not below the pool's
	// DATABASE_LOAD_CPU_THRESHOLD.
	WaitLoad = "load"
	// WaitBehindHead: queries ahead of it in the pool's queue wait.
	WaitBehindHead = "behind_head"
	// WaitStarting: the head, held back by nothing any more; it starts at
	// the next event.
	WaitStarting = "starting"
	// WaitUserLimit: the query's user runs CONCURRENT_QUERY_LIMIT_PER_USER
	// queries in the pool.
	WaitUserLimit = "user_limit"
	// WaitFairOrder: other users come before the query's user in the
	// pool's fair order (QUEUE_POLICY='fair').
	WaitFairOrder = "fair_order"
	// WaitBehindOwn: the user's turn has come, but their own older
	// queries start first.
	WaitBehindOwn = "behind_own"
)

// Wait says why a queued query is not running, with the figures the
// reason is about: in a ReplyQueued and in the queries view.
type Wait struct {
	Reason string `json:"reason"`
	// Ahead is how many queries wait ahead of it in its pool's queue.
	Ahead int `json:"ahead"`
	// HeadReason is why the head of the queue waits: the query's own
	// reason when it is the head, never WaitBehindHead.
	HeadReason string `json:"head_reason"`
	// Running is the pool's running queries, Limit its
	// CONCURRENT_QUERY_LIMIT (-1: none).
	Running int `json:"running"`
	Limit   int `json:"limit"`
	// LoadPercent is the host's moving average load at the last refresh,
	// ReservedPercent what queries admitted since reserve, and
	// ThresholdPercent the pool's DATABASE_LOAD_CPU_THRESHOLD (-1: none),
	// each percent of the host.
	LoadPercent      float64 `json:"load_percent"`
	ReservedPercent  float64 `json:"reserved_percent"`
	ThresholdPercent float64 `json:"threshold_percent"`
	// UserRunning is the query's user's running queries in the pool,
	// UserLimit its CONCURRENT_QUERY_LIMIT_PER_USER (-1: none); UsersAhead
	// the users before the user in the fair order, OwnAhead the user's
	// own queries ahead of this one.
	UserRunning int `json:"user_running"`
	UserLimit   int `json:"user_limit"`
	UsersAhead  int `json:"users_ahead,omitempty"`
	OwnAhead    int `json:"own_ahead,omitempty"`
}

// String says it in a few words, for a progress line or a table:
// "2 of 2 running", "load 72% + reserved 20% >= threshold 80%",
// "behind 3; head: 2 of 2 running", "starting", "you have 3 running of
// your 3", "2 users ahead of you in the fair order; 4 of 4 running",
// "behind 1 of your own; 4 of 4 running".
func (w Wait) String() string {
	switch w.Reason {
	case WaitBehindHead:
		return "behind " + strconv.Itoa(w.Ahead) + "; head: " + w.head()
	case WaitUserLimit:
		return "you have " + strconv.Itoa(w.UserRunning) + " running of your " + strconv.Itoa(w.UserLimit)
	case WaitFairOrder:
		users := " users"
		if w.UsersAhead == 1 {
			users = " user"
		}
		return strconv.Itoa(w.UsersAhead) + users + " ahead of you in the fair order; " + w.head()
	case WaitBehindOwn:
		return "behind " + strconv.Itoa(w.OwnAhead) + " of your own; " + w.head()
	}
	return w.head()
}

// head is why the head of the queue waits.
func (w Wait) head() string {
	switch w.HeadReason {
	case WaitConcurrency:
		return strconv.Itoa(w.Running) + " of " + strconv.Itoa(w.Limit) + " running"
	case WaitLoad:
		return "load " + percent(w.LoadPercent) + " + reserved " + percent(w.ReservedPercent) +
			" >= threshold " + percent(w.ThresholdPercent)
	case WaitStarting:
		return "starting"
	}
	return w.HeadReason
}

// percent formats a percentage with at most one decimal: "72%", "12.5%".
func percent(p float64) string {
	s := strconv.FormatFloat(p, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}
