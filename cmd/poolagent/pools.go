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
			"queries running and queued and the CPU limit written now (vCPUs; max = none). The table\n" +
			"fits 120 columns with short labels, explained under it; --wide shows every column under\n" +
			"YDB's name. --format json adds every parameter and the cgroup's cpu.weight. Any local user\n" +
			"may look. A lowered memory limit the daemon holds back, its cgroup using more, is shown\n" +
			"under the table by pool (\"olap: pending: usage X above new limit Y ...\").\n\n" +
			"In fleet mode (daemon --etcd) the running and queued queries of a globally limited\n" +
			"pool are the whole cluster's (Node *); --local counts this node's alone (Node is its\n" +
			"name).",
		Flags: append(viewFlags(), localFlag(),
			&cli.BoolFlag{Name: "wide", Usage: "every column under YDB's name (the default table has short labels and fits 120 columns)"}),
		Action: func(c *cli.Context) error {
			return showView(c, protocol.OpPools, func(r protocol.AdminReply) error {
				if c.String("format") == "json" {
					return sysview.WriteJSON(c.App.Writer, r.Pools)
				}
				return sysview.WritePools(c.App.Writer, r.Pools, c.Bool("wide"))
			})
		},
	}
}
