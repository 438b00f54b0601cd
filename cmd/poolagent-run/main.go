// Command poolagent-run is the slim client of the poolagent daemon: it runs
// a command as a query in a resource pool exactly like `poolagent run`
// (same flags, messages and exit statuses), but links only the standard
// library, golang.org/x/sys and package client, so it starts much faster
// than the full poolagent binary (docs/performance.md "Admission"). Use
// it where a query's start cost matters: many short commands, scripts,
// build steps.
package main

import (
	"os"

	"github.com/poolagent/poolagent/internal/client"
)

func main() {
	name := "poolagent-run"
	if os.Args[0] == client.HandedOver {
		name = client.HandedOver
	}
	os.Exit(client.RunCommand(name, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
