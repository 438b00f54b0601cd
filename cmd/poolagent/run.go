package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
)

// runCommand is `poolagent run`: run a command as a query in a pool. The
// whole command, flags included, is client.RunCommand, which the slim
// poolagent-run binary runs too.
func runCommand() *cli.Command {
	return &cli.Command{
		Name:            "run",
		Usage:           client.RunSummary,
		ArgsUsage:       client.RunArgsUsage,
		Description:     client.RunHelp,
		SkipFlagParsing: true,
		HideHelp:        true,
		Action: func(c *cli.Context) error {
			if code := client.RunCommand("poolagent run", c.Args().Slice(), os.Stdin, os.Stdout, os.Stderr); code != 0 {
				return cli.Exit("", code)
			}
			return nil
		},
	}
}
