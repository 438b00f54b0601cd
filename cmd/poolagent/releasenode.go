package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/protocol"
)

// fleetCommand is `poolagent fleet`: what an administrator does to the
// cluster through a node's daemon.
func fleetCommand() *cli.Command {
	return &cli.Command{
		Name:  "fleet",
		Usage: "administer the fleet (etcd) cluster through this node's daemon (docs/fleet.md)",
		Subcommands: []*cli.Command{{
			Name:      "release-node",
			Usage:     "release the strict slots of a node that vanished and will not come back (administrators only)",
			ArgsUsage: "NODE",
			Description: "A pool with GLOBAL_SLOTS='strict' keeps the slots of a node that vanished until the node\n" +
				"comes back and adopts what still runs. When it will not come back, this releases them:\n" +
				"its queries, if any still run, then run beside the slots given away. The daemon logs\n" +
				"who released which node. See docs/fleet.md, \"Strict slots\".",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "socket", Value: protocol.DefaultSocket, Usage: "the daemon's socket `PATH`"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fmt.Errorf("fleet release-node: want one NODE, the name it had in the cluster (poolagent queries shows it)")
				}
				r, err := client.Ask(c.String("socket"), protocol.Request{Op: protocol.OpReleaseNode, Node: c.Args().First()})
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "node %s: %d strict slots released\n", c.Args().First(), r.Released)
				return nil
			},
		}},
	}
}
