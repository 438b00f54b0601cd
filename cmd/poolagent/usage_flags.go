package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/suggest"
)

// commandOf is the command c runs, as typed ("poolagent check"), and its
// flags.
func commandOf(c *cli.Context) (string, []cli.Flag) {
	if c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name {
		return c.App.Name, c.App.VisibleFlags()
	}
	if c.Command.HelpName != "" {
		return c.Command.HelpName, c.Command.VisibleFlags()
	}
	return "poolagent " + c.Command.Name, c.Command.VisibleFlags()
}

// flagNames is every name of flags, long and short.
func flagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return names
}

// acceptedFlags lists flags as typed, "--pools/-p".
func acceptedFlags(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		var forms []string
		for _, n := range f.Names() {
			forms = append(forms, dashed(n))
		}
		out = append(out, strings.Join(forms, "/"))
	}
	return out
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// acceptedValue says what a flag takes, from its type and its help's
// placeholder.
func acceptedValue(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "a duration with its unit (ns, us, ms, s, m, h), such as 20ms or 1.5s"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "a whole number, such as 3"
	case *cli.Float64Flag:
		return "a number, such as 10 or 1.5"
	case *cli.BoolFlag:
		return "true or false, or the flag alone"
	}
	if df, ok := f.(cli.DocGenerationFlag); ok {
		_, usage := unquotedUsage(df.GetUsage())
		return strings.TrimSuffix(usage, " (required)")
	}
	return "a value"
}

// unquotedUsage splits a flag's usage into its `PLACEHOLDER` and the text
// without the backquotes.
func unquotedUsage(usage string) (placeholder, text string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}

// dashed writes a flag name as typed: --pools, -p.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// didYouMean is "; did you mean --pools?" for the name among names nearest
// to word (suggest.Nearest), shown as typed; "" when none is near.
func didYouMean(word string, names []string, show func(string) string) string {
	if n := suggest.Nearest(word, names); n != "" {
		return "; did you mean " + show(n) + "?"
	}
	return ""
}
