package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/oci"
)

// bashCompletion and zshCompletion complete poolagent's commands and flags
// by asking the binary itself (--generate-bash-completion, the CLI
// framework's completion protocol), so they always match its help text.
const (
	bashCompletion = `# bash completion for poolagent; install as
# /usr/share/bash-completion/completions/poolagent (scripts/install.sh does).
_poolagent() {
	local cur opts
	COMPREPLY=()
	cur="${COMP_WORDS[COMP_CWORD]}"
	if [[ "$cur" == -* ]]; then
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _poolagent poolagent
`
	zshCompletion = `#compdef poolagent
# zsh completion for poolagent; install as _poolagent in a directory of
# $fpath, such as /usr/share/zsh/vendor-completions (scripts/install.sh does).
_poolagent() {
	local -a opts
	local cur=${words[-1]}
	if [[ "$cur" == -* ]]; then
		opts=("${(@f)$(env 0=zsh ${words[@]:0:#words[@]-1} $cur --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(env 0=zsh ${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
compdef _poolagent poolagent
`
)

// completionCommand is `poolagent completion bash|zsh`: print the shell's
// completion script.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the bash or zsh completion script (scripts/install.sh installs both)",
		ArgsUsage: "bash|zsh",
		BashComplete: func(c *cli.Context) {
			fmt.Fprintln(c.App.Writer, "bash\nzsh")
		},
		Action: func(c *cli.Context) error {
			scripts := map[string]string{"bash": bashCompletion, "zsh": zshCompletion}
			script, ok := scripts[c.Args().First()]
			if c.NArg() != 1 || !ok {
				return usageErr("give one shell, bash or zsh (got %q)", c.Args().Slice())
			}
			_, err := io.WriteString(c.App.Writer, script)
			return err
		},
	}
}

// manCommand is `poolagent man`: print the manual page, made from the
// same help text as --help.
func manCommand() *cli.Command {
	const accepted = "accepted: no argument for poolagent(1), poolagent-run or poolagent-oci"
	return &cli.Command{
		Name:      "man",
		Usage:     "print the manual page poolagent(1), poolagent-run(1) or poolagent-oci(1), made from the help text (scripts/install.sh installs all three)",
		ArgsUsage: "[poolagent-run|poolagent-oci]",
		Action: func(c *cli.Context) error {
			var page string
			switch name := c.Args().First(); {
			case c.NArg() > 1:
				return usageErr("one page at a time, got %q (%s)", c.Args().Slice(), accepted)
			case name == "poolagent-run":
				page = slimManPage(name, client.RunSummary, client.RunArgsUsage, client.RunHelp)
			case name == "poolagent-oci":
				page = slimManPage(name, oci.Summary, oci.ArgsUsage, oci.Help)
			case name != "":
				return usageErr("no page %q (%s)", name, accepted)
			default:
				page = manPage(c.App)
			}
			_, err := io.WriteString(c.App.Writer, page)
			return err
		},
	}
}
