package main

import (
	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/sysview"
)

// classifiersCommand is `poolagent classifiers`: the host's
// .sys/resource_pool_classifiers.
func classifiersCommand() *cli.Command {
	return &cli.Command{
		Name:  "classifiers",
		Usage: "show the pool classifiers in force, lowest rank (tried first) first (YDB's .sys/resource_pool_classifiers)",
		Description: "Asks the daemon for every classifier: Name, Rank, MemberName (a user, %group or\n" +
			"all-users@well-known), HasAppName (the executable's base name), and ResourcePool or\n" +
			"Action (reject). Any local user may look.",
		Flags: viewFlags(),
		Action: func(c *cli.Context) error {
			return showView(c, protocol.OpClassifiers, func(r protocol.AdminReply) error {
				if c.String("format") == "json" {
					return sysview.WriteJSON(c.App.Writer, r.Classifiers)
				}
				return sysview.WriteClassifiers(c.App.Writer, r.Classifiers)
			})
		},
	}
}

// localFlag is --local of the views that show the cluster in fleet mode.
func localFlag() cli.Flag {
	return &cli.BoolFlag{Name: "local", Usage: "fleet mode: this node's queries only (default: the whole cluster's)"}
}

// viewFlags are the flags of the view commands.
func viewFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Value: "text", Usage: "text (a table) or json"},
		&cli.StringFlag{Name: "socket", Value: protocol.DefaultSocket, Usage: "the daemon's socket `PATH`"},
	}
}

// showView asks the daemon for a view and writes it.
func showView(c *cli.Context, op string, write func(protocol.AdminReply) error) error {
	if _, err := formatOf(c, "text", "json"); err != nil {
		return err
	}
	r, err := client.Ask(c.String("socket"), protocol.Request{Op: op, Local: c.Bool("local")})
	if err != nil {
		return err
	}
	return write(r)
}
