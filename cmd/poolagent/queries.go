package main

import (
	"github.com/urfave/cli/v2"

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
			"alone.",
		Flags: append(viewFlags(), localFlag()),
		Action: func(c *cli.Context) error {
			return showView(c, protocol.OpQueries, func(r protocol.AdminReply) error {
				if c.String("format") == "json" {
					return sysview.WriteJSON(c.App.Writer, r.Queries)
				}
				return sysview.WriteQueries(c.App.Writer, r.Queries)
			})
		},
	}
}
