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
}

// String says it in a few words, for a progress line or a table:
// "2 of 2 running", "load 72% + reserved 20% >= threshold 80%",
// "behind 3; head: 2 of 2 running", "starting".
func (w Wait) String() string {
	if w.Reason == WaitBehindHead {
		return "behind " + strconv.Itoa(w.Ahead) + "; head: " + w.head()
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
