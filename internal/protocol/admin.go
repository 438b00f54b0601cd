package protocol

import (
	"encoding/json"
	"time"
)

// AdminReply answers an operator operation (OpSQL and the system views).
type AdminReply struct {
	Type  string `json:"type"` // ReplyDone or ReplyError
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Change is the persisted run-time change (OpSQL).
	Change *Change `json:"change,omitempty"`
	// Warnings are what was accepted but deserves attention (OpSQL).
	Warnings    []string     `json:"warnings,omitempty"`
	Pools       []Pool       `json:"pools,omitempty"`
	Classifiers []Classifier `json:"classifiers,omitempty"`
	Queries     []Query      `json:"queries,omitempty"`
	// Traces are OpHistory's answer: for each pool, oldest first, one
	// trace per stretch under one CPU limit, in the trace format of
	// docs/advise.md.
	Traces []json.RawMessage `json:"traces,omitempty"`
	// Released is how many slots an OpReleaseNode released.
	Released int `json:"released,omitempty"`
	// Killed is the pool of the query an OpKill killed.
	Killed string `json:"killed,omitempty"`
}

// Change is a run-time change the daemon accepted and saved in its state
// directory (docs/operate.md), as it reports it to the administrator who
// sent it.
type Change struct {
	// Seq numbers changes from 1 without gaps.
	Seq uint64 `json:"seq"`
	// Time is when the change was accepted, UTC.
	Time time.Time `json:"time"`
	// UID is the administrator's user id from the socket's peer credentials.
	UID uint32 `json:"uid"`
	// User is the administrator's user name, "" if it has none.
	User string `json:"user,omitempty"`
	// DDL is the accepted statements, verbatim.
	DDL string `json:"ddl"`
	// SavedIn says where the change was saved: "the daemon's state
	// directory", or in fleet mode the cluster's etcd.
	SavedIn string `json:"saved_in,omitempty"`
}
