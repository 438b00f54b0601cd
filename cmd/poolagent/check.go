package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/planner"
)

// checkCommand is `poolagent check`: validate a pool file without
// planning or touching any cgroup.
func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "validate a pool file (YDB resource pool DDL) and report every problem with its place",
		Description: "Parses and applies the pool file (docs/pools.md) to an empty model, as the daemon\n" +
			"would at start. Problems are printed one per line as FILE:LINE:COL: message; a file\n" +
			"with any problem is refused as a whole. Warnings (accepted, but worth knowing) go\n" +
			"to stderr as well; a valid file prints a one-line summary.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pools", Aliases: []string{"p"}, Usage: "pool `FILE` (YDB DDL)", Required: true},
		},
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	path := c.String("pools")
	m, err := loadPools(c, path, "file refused")
	if err != nil {
		return err
	}
	pools, classifiers, grants := len(m.Pools()), len(m.Classifiers()), len(m.Grants())
	fmt.Fprintf(c.App.Writer, "%s: ok: %d %s, %d %s, %d %s\n", path,
		pools, plural(pools, "pool", "pools"),
		classifiers, plural(classifiers, "classifier", "classifiers"),
		grants, plural(grants, "grant", "grants"))
	return nil
}

// loadPools reads and applies a pool file. Each refused statement, or
// else each warning, goes to stderr as one "FILE:LINE:COL: …" line; the
// error returned then only sums the problems up and ends with outcome,
// what the command did not do because of them ("nothing applied").
func loadPools(c *cli.Context, path, outcome string) (*planner.Model, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pool file: %w", err)
	}
	m, warnings, err := planner.Load(path, src)
	if list := planner.ErrorList(nil); errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(c.App.ErrWriter, e)
		}
		return nil, fmt.Errorf("%s: %d %s, %s", path, len(list), plural(len(list), "error", "errors"), outcome)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range warnings {
		fmt.Fprintln(c.App.ErrWriter, w)
	}
	return m, nil
}
