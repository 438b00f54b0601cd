package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// usageError is a mistake in how poolagent was called: an unknown command
// or flag, a flag without its value or with a value it does not accept, a
// required flag missing. It is one line saying what was wrong and what is
// accepted, with the nearest name where there is one; poolagent exits 2 on
// it and shows the help only when asked (--help, poolagent help COMMAND).
type usageError struct {
	// cmd is the command it is about, "poolagent check"; "" for a check
	// made inside a command, whose message names the flag.
	cmd string
	msg string
}

func (e *usageError) Error() string { return e.msg }

// usageErr is a usage error found by a command's own check of a flag's
// value: "--periods 0 is not accepted (accepted: 1 or more)".
func usageErr(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// The flag package's errors, which the CLI framework passes on.
var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	missingValue  = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
	badValue      = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): (.*)$`)
)

// onUsageError turns the CLI framework's flag errors into usage errors
// (it would print them with the whole help page).
func onUsageError(c *cli.Context, err error, _ bool) error {
	cmd, flags := commandOf(c)
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		return &usageError{cmd: cmd, msg: fmt.Sprintf("unknown flag %s%s (accepted: %s)",
			dashed(m[1]), didYouMean(m[1], flagNames(flags), dashed), strings.Join(acceptedFlags(flags), ", "))}
	}
	if m := missingValue.FindStringSubmatch(msg); m != nil {
		f := findFlag(flags, m[1])
		return &usageError{cmd: cmd, msg: fmt.Sprintf("%s needs a value (accepted: %s)", dashed(m[1]), acceptedValue(f))}
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		value, name, why := m[1], m[2], m[3]
		f := findFlag(flags, name)
		if _, isDuration := f.(*cli.DurationFlag); isDuration {
			if _, err := strconv.ParseFloat(value, 64); err == nil {
				return &usageError{cmd: cmd, msg: fmt.Sprintf("%s %s has no unit (accepted: a duration with its unit, such as %sms or %ss; units ns, us, ms, s, m, h)",
					dashed(name), value, value, value)}
			}
		}
		if why == "parse error" {
			return &usageError{cmd: cmd, msg: fmt.Sprintf("%s %q is not accepted (accepted: %s)", dashed(name), value, acceptedValue(f))}
		}
		return &usageError{cmd: cmd, msg: fmt.Sprintf("%s %q: %s (accepted: %s)", dashed(name), value, why, acceptedValue(f))}
	}
	return &usageError{cmd: cmd, msg: msg}
}

// unknownCommand is the root's action: poolagent was given a word that is
// no command.
func unknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	var names []string
	for _, cmd := range c.App.VisibleCommands() {
		names = append(names, cmd.Name)
	}
	word := c.Args().First()
	return &usageError{cmd: c.App.Name, msg: fmt.Sprintf("unknown command %q%s (accepted: %s; poolagent help lists them)",
		word, didYouMean(word, names, func(s string) string { return s }), strings.Join(names, ", "))}
}

// unknownSubcommand is the action of a command with subcommands: given
// none, its help; given a word that is none of them, a usage error with
// the nearest.
func unknownSubcommand(c *cli.Context, path string, subs []*cli.Command) error {
	if !c.Args().Present() {
		return cli.ShowSubcommandHelp(c)
	}
	var names []string
	for _, s := range subs {
		names = append(names, s.Name)
	}
	word := c.Args().First()
	return &usageError{cmd: path, msg: fmt.Sprintf("unknown command %q%s (accepted: %s)",
		word, didYouMean(word, names, func(s string) string { return s }), strings.Join(names, ", "))}
}

// checkCommandLine replaces the CLI framework's check of required flags,
// which prints the whole help page, by a usage error naming the flag and
// what it takes (the flag's help says "(required)"), and refuses an
// argument given to a command that takes none: the framework would ignore
// it, and every flag after it.
func checkCommandLine(cmd *cli.Command, path string) {
	var required []cli.Flag
	for _, f := range cmd.Flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Required {
				f.Required, f.Usage = false, f.Usage+" (required)"
				required = append(required, f)
			}
		case *cli.DurationFlag:
			if f.Required {
				f.Required, f.Usage = false, f.Usage+" (required)"
				required = append(required, f)
			}
		}
	}
	noArgs := cmd.ArgsUsage == "" && !cmd.SkipFlagParsing && len(cmd.Subcommands) == 0
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		name := path
		if noArgs && c.Args().Present() {
			return &usageError{cmd: name, msg: fmt.Sprintf("unexpected argument %q (accepted: flags only, %s; a flag after an argument is not read)",
				c.Args().First(), strings.Join(acceptedFlags(c.Command.VisibleFlags()), ", "))}
		}
		for _, f := range required {
			if !c.IsSet(f.Names()[0]) {
				return &usageError{cmd: name, msg: fmt.Sprintf("%s is required (accepted: %s)", dashed(f.Names()[0]), acceptedValue(f))}
			}
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
}

// errorLine is how main prints err: a usage error of a command as
// "poolagent check: …", anything else as "poolagent: …".
func errorLine(err error) string {
	if ue, ok := err.(*usageError); ok && ue.cmd != "" {
		return ue.cmd + ": " + ue.msg
	}
	return "poolagent: " + err.Error()
}
