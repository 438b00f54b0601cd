package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// runHelpTemplate is `poolagent help run`: its description already lists
// its options (client.RunHelp, shared with poolagent-run --help), so the
// framework's OPTIONS section would list them twice.
const runHelpTemplate = `NAME:
   {{.HelpName}} - {{.Usage}}

USAGE:
   {{.HelpName}} {{.ArgsUsage}}

DESCRIPTION:
   {{wrap .Description 3}}
`

// wireHelp makes every command's help and errors poolagent's: flag errors
// as one line (onUsageError), required flags checked without the help page
// (checkCommandLine), no per-command "help" subcommand, and run's help without
// a second list of options.
func wireHelp(app *cli.App) {
	cli.FlagStringer = flagString
	app.OnUsageError = onUsageError
	app.Action = unknownCommand
	// A help command of our own keeps the framework from adding its
	// own, and with it the --help flag: add that here.
	app.Commands = append(app.Commands, helpCommand())
	app.Flags = append(app.Flags, cli.HelpFlag)
	for _, cmd := range app.Commands {
		wireCommand(cmd, "poolagent "+cmd.Name)
	}
	if run := app.Command("run"); run != nil {
		run.CustomHelpTemplate = runHelpTemplate
	}
}

// wireCommand wires cmd, called path ("poolagent fleet release-node"),
// and its subcommands as wireHelp does the app.
func wireCommand(cmd *cli.Command, path string) {
	cmd.OnUsageError = onUsageError
	cmd.HideHelpCommand = true
	if len(cmd.Subcommands) > 0 && cmd.Action == nil {
		cmd.Action = func(c *cli.Context) error { return unknownSubcommand(c, path, cmd.Subcommands) }
	}
	checkCommandLine(cmd, path)
	nameUsageErrors(cmd, path)
	for _, sub := range cmd.Subcommands {
		wireCommand(sub, path+" "+sub.Name)
	}
}

// nameUsageErrors makes the usage errors cmd's action returns name cmd:
// "poolagent compare: --repeat 0 is not accepted …".
func nameUsageErrors(cmd *cli.Command, path string) {
	action := cmd.Action
	if action == nil {
		return
	}
	cmd.Action = func(c *cli.Context) error {
		err := action(c)
		if ue, ok := err.(*usageError); ok && ue.cmd == "" {
			ue.cmd = path
		}
		return err
	}
}

// flagString is a flag's line in the help: its names with the value's
// placeholder, a tab, and its usage with the default said once.
func flagString(f cli.Flag) string {
	names, usage := flagHelp(f)
	return names + "\t" + usage
}

// flagHelp is a flag's names as typed with their placeholder, "--pools
// FILE, -p FILE", and its usage. The default is added unless the usage
// says it already ("(default: the pool's period)") or it is a zero value
// that says nothing (false, 0s, "").
func flagHelp(f cli.Flag) (names, usage string) {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return strings.Join(f.Names(), ", "), ""
	}
	placeholder, usage := unquotedUsage(df.GetUsage())
	if df.TakesValue() && placeholder == "" {
		placeholder = "VALUE"
	}
	var forms []string
	for _, n := range df.Names() {
		form := dashed(n)
		if df.TakesValue() {
			form += " " + placeholder
		}
		forms = append(forms, form)
	}
	if def := df.GetDefaultText(); !strings.Contains(usage, "(default") && !saysNothing(def) {
		usage += " (default: " + def + ")"
	}
	return strings.Join(forms, ", "), usage
}

// saysNothing is true of a default that is only the type's zero value.
func saysNothing(def string) bool {
	switch def {
	case "", "false", "0s", `""`, "[]":
		return true
	}
	return false
}

// helpCommand is `poolagent help [COMMAND]`, the framework's but for an
// unknown command, which is a usage error with the nearest name (the
// framework says "No help topic" and exits 3).
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Aliases:   []string{"h"},
		Usage:     "show the commands, or one command's help",
		ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			word := c.Args().First()
			switch {
			case word == "":
				return cli.ShowAppHelp(c)
			case c.App.Command(word) != nil:
				return cli.ShowCommandHelp(c, word)
			}
			var names []string
			for _, cmd := range c.App.VisibleCommands() {
				names = append(names, cmd.Name)
			}
			return &usageError{cmd: "poolagent help", msg: fmt.Sprintf("no command %q%s (accepted: %s)",
				word, didYouMean(word, names, func(s string) string { return s }), strings.Join(names, ", "))}
		},
	}
}
