package client

import (
	"fmt"

	"github.com/poolagent/poolagent/internal/protocol"
)

// Placement is a query whose processes the caller's program places
// itself (protocol.OpPlace): admitted, with its cgroup made, until the
// caller calls Done or Detach. An OCI runtime creates a container in a
// cgroup below Cgroup.
type Placement struct {
	// Pool and Query name the query; Cgroup is its cgroup's path as
	// /proc/PID/cgroup names it on cgroup v2; CPULimit is its CPU cap in
	// vCPUs, as planned when it was admitted.
	Pool, Query, Cgroup string
	CPULimit            float64
	c                   *client
}

// Place asks the daemon for a query whose processes the caller places,
// and waits in the queue as Run does (progress on opts.Progress; a signal
// on opts.Signals leaves the queue, with ErrLeftQueue). opts.Args, Env
// and the standard files are not used: nothing is started. A refusal is
// a *RefusedError in the daemon's words.
func Place(opts RunOptions) (*Placement, error) {
	c, err := ask(opts, protocol.OpPlace)
	if err != nil {
		return nil, err
	}
	started, _, err := c.wait()
	if err == nil && (started.Type != protocol.ReplyStarted || started.Cgroup == "") {
		err = fmt.Errorf("the daemon answered %q without a cgroup to a placed query, want %q with one: is the daemon older than this client?", started.Type, protocol.ReplyStarted)
	}
	if err != nil {
		c.conn.Close()
		return nil, err
	}
	return &Placement{Pool: started.Pool, Query: started.Query, Cgroup: started.Cgroup, CPULimit: started.CPULimit, c: c}, nil
}

// Done tells the daemon that the caller's program has returned and
// waits until the query's cgroup is empty: for a program that ran the
// query's processes to their end. It returns the query's statistics.
func (p *Placement) Done() (protocol.Stats, error) {
	defer p.c.conn.Close()
	if err := p.c.enc.Encode(protocol.Request{Op: protocol.OpExited}); err != nil {
		return protocol.Stats{}, fmt.Errorf("tell the daemon the query's runtime returned: %w", err)
	}
	for r := range p.c.replies {
		switch r.Type {
		case protocol.ReplyDone:
			if r.Stats != nil {
				return *r.Stats, nil
			}
		case protocol.ReplyError:
			return protocol.Stats{}, &RefusedError{Code: r.Code, Message: r.Error}
		}
	}
	return protocol.Stats{}, errDaemonGone
}

// Detach hangs up: the daemon holds the query's slot until its cgroup is
// empty, for processes that run on after the caller (a container created
// detached).
func (p *Placement) Detach() error { return p.c.conn.Close() }
