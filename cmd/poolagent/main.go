// Command poolagent brings database-style resource pools to a Linux host,
// enforced by the kernel's CPU bandwidth controller, and predicts the
// throttling the kernel will report.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	// Initialised first: `poolagent run` becomes poolagent-run here.
	_ "github.com/poolagent/poolagent/internal/handover"
	"github.com/poolagent/poolagent/internal/version"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(exitCode(err))
	}
}

// newApp wires the commands; each lives in its own file.
func newApp() *cli.App {
	app := &cli.App{
		Name:                 "poolagent",
		Usage:                "resource pools for Linux hosts, enforced with cgroup CPU bandwidth control",
		Version:              version.Current().String(),
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			simulateCommand(),
			compareCommand(),
			compareWorkerCommand(),
			planCommand(),
			checkCommand(),
			applyCommand(),
			teardownCommand(),
			daemonCommand(),
			runCommand(),
			statCommand(),
			recordCommand(),
			adviseCommand(),
			sqlCommand(),
			fleetCommand(),
			poolsCommand(),
			classifiersCommand(),
			queriesCommand(),
			completionCommand(),
			manCommand(),
			versionCommand(),
		},
	}
	wireHelp(app)
	return app
}

// versionCommand is `poolagent version`, the same as --version: the
// build's version and commit (internal/version).
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version and the commit this binary was built from (as --version)",
		Action: func(c *cli.Context) error {
			cli.ShowVersion(c)
			return nil
		},
	}
}

// exitCode maps an error to the process exit status: a cli.ExitCoder keeps
// its own code, a usage error is 2, anything else is 1.
func exitCode(err error) int {
	if ec, ok := err.(cli.ExitCoder); ok && ec.ExitCode() != 0 {
		return ec.ExitCode()
	}
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return 2
	}
	return 1
}
