package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/compare"
)

// compareWorkerName is the hidden subcommand `poolagent compare` starts
// for every task of a scenario.
const compareWorkerName = "compare-worker"

// compareWorkerCommand is the CPU-burning worker of `poolagent compare`:
// NEED_USEC THREADS [CPU,CPU...]. It pins itself, says ready, waits for the
// go byte on stdin, burns its need by its own CPU clock and reports.
func compareWorkerCommand() *cli.Command {
	return &cli.Command{
		Name:            compareWorkerName,
		Hidden:          true,
		SkipFlagParsing: true,
		Usage:           "burn CPU for poolagent compare (internal)",
		Action: func(c *cli.Context) error {
			spec, err := compare.ParseWorkerArgs(c.Args().Slice())
			if err != nil {
				return err
			}
			return compare.RunWorker(spec, os.Stdin, os.Stdout)
		},
	}
}
