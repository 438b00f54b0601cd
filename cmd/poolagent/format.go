package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// formatOf is the --format flag's value when it is one of accepted; the
// error names the flag, the value and what is accepted.
func formatOf(c *cli.Context, accepted ...string) (string, error) {
	f := c.String("format")
	if !slices.Contains(accepted, f) {
		return "", usageErr("--format %q is not accepted (accepted: %s)", f, strings.Join(accepted, ", "))
	}
	return f, nil
}
