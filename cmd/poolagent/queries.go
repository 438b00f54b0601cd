package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/sysview"
)

// queriesCommand is `poolagent queries`: the queries running and queued.
func queriesCommand() *cli.Command {
	return &cli.Command{
		Name:  "queries",
		Usage: "show the queries running and queued: user, pool, wait, CPU use and throttling",
		Description: "Asks the daemon for every query: its id (the name of its cgroup), pool\n" +
			"(ResourcePoolId), state (RUNNING or QUEUED, with the queue position), the calling user\n" +
			"and `poolagent run` process, the time queued and running, its CPU limit (vCPUs) and its\n" +
			"cgroup's CPU usage and throttling. Queries an earlier daemon left running show as\n" +
			"(adopted). --format json gives the times and counters in µs. Any local user may look.\n\n" +
			"In fleet mode (daemon --etcd) a Node column says where each query is, and the queries\n" +
			"of globally limited pools on the other nodes are listed too, with what the cluster\n" +
			"knows of them (pool, state, position, time since arrival); --local lists this node's\n" +
			"alone.\n\n" +
			"--kill QUERY_ID kills a running query of this node instead (administrators only):\n" +
			"every process in its cgroup at once, by cgroup.kill (Linux 5.14+) or by freezing the\n" +
			"cgroup and then signalling, so that no child forked meanwhile survives. The query then\n" +
			"ends as one whose command was killed: its client exits with status 137.",
		Flags: append(viewFlags(), localFlag(),
			&cli.StringFlag{Name: "kill", Usage: "kill the running query `QUERY_ID` (its QueryId) instead of listing"}),
		Action: func(c *cli.Context) error {
			if id := c.String("kill"); id != "" {
				r, err := client.Ask(c.String("socket"), protocol.Request{Op: protocol.OpKill, Query: id})
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "query %s in pool %s killed\n", id, r.Killed)
				return nil
			}
			return showView(c, protocol.OpQueries, func(r protocol.AdminReply) error {
				if c.String("format") == "json" {
					return sysview.WriteJSON(c.App.Writer, r.Queries)
				}
				return sysview.WriteQueries(c.App.Writer, r.Queries)
			})
		},
	}
}
