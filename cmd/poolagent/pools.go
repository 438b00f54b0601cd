package main

import (
	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/sysview"
)

// poolsCommand is `poolagent pools`: the host's .sys/resource_pools.
func poolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "pools",
		Usage: "show the pools in force with their running and queued queries (YDB's .sys/resource_pools)",
		Description: "Asks the daemon for every pool: YDB's columns (Name, ConcurrentQueryLimit, QueueSize,\n" +
			"DatabaseLoadCpuThreshold, ResourceWeight, TotalCpuLimitPercentPerNode,\n" +
			"QueryCpuLimitPercentPerNode, QueryMemoryLimitPercentPerNode; -1 = not set), then the\n" +
			"queries running and queued and the CPU limit written now (vCPUs; max = none). --format\n" +
			"json adds every parameter and the cgroup's cpu.weight. Any local user may look.\n\n" +
			"In fleet mode (daemon --etcd) the running and queued queries of a globally limited\n" +
			"pool are the whole cluster's (Node *); --local counts this node's alone (Node is its\n" +
			"name).",
		Flags: append(viewFlags(), localFlag()),
		Action: func(c *cli.Context) error {
			return showView(c, protocol.OpPools, func(r protocol.AdminReply) error {
				if c.String("format") == "json" {
					return sysview.WriteJSON(c.App.Writer, r.Pools)
				}
				return sysview.WritePools(c.App.Writer, r.Pools)
			})
		},
	}
}
