package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// manPage is poolagent(1): every command with its description and options,
// written from the same text as the help.
func manPage(app *cli.App) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH POOLAGENT 1\n.SH NAME\npoolagent \\- %s\n", roff(app.Usage))
	b.WriteString(".SH SYNOPSIS\n.B poolagent\nCOMMAND [OPTIONS] [ARGUMENTS]\n.br\n.B poolagent\nhelp [COMMAND] | version\n")
	b.WriteString(".SH DESCRIPTION\n" + roff(strings.ToUpper(app.Usage[:1])+app.Usage[1:]) + ". Each command is below with its options; " +
		"\\fBpoolagent help\\fR \\fICOMMAND\\fR prints the same. A mistake in a command or a flag is one line on " +
		"standard error, with the nearest name, and the exit status 2.\n")
	b.WriteString(".SH OPTIONS\n")
	writeManFlags(&b, app.VisibleFlags())
	b.WriteString(".SH COMMANDS\n")
	for _, cmd := range app.VisibleCommands() {
		if cmd.Name != "help" {
			writeManCommand(&b, cmd, cmd.Name)
		}
	}
	b.WriteString(".SH SEE ALSO\npoolagent\\-run(1), poolagent\\-oci(1)\n")
	return b.String()
}

// writeManCommand writes cmd, called name ("fleet release-node"), and its
// subcommands: usage, synopsis, description and options.
func writeManCommand(b *strings.Builder, cmd *cli.Command, name string) {
	fmt.Fprintf(b, ".SS %s\n%s.\n.PP\n", name, roff(cmd.Usage))
	args := cmd.ArgsUsage
	if args == "" && len(cmd.VisibleFlags()) > 0 {
		args = "[OPTIONS]"
	}
	if len(cmd.Subcommands) > 0 {
		args = "COMMAND [OPTIONS]"
	}
	fmt.Fprintf(b, ".B poolagent %s\n%s\n", roff(name), roff(strings.TrimSpace(args)))
	desc, opts, hasOpts := strings.Cut(cmd.Description, "\n\nOptions:\n")
	for _, para := range strings.Split(desc, "\n\n") {
		if strings.TrimSpace(para) != "" {
			b.WriteString(".PP\n" + roff(para) + "\n")
		}
	}
	switch {
	case cmd.Name == "run" && hasOpts:
		// run's options are its own parser's (client.RunHelp).
		b.WriteString(".PP\nOptions:\n.nf\n" + roff(opts) + "\n.fi\n")
	case len(cmd.Subcommands) == 0 && len(cmd.VisibleFlags()) > 0:
		b.WriteString(".PP\nOptions:\n")
		writeManFlags(b, cmd.VisibleFlags())
	}
	for _, sub := range cmd.Subcommands {
		if !sub.Hidden {
			writeManCommand(b, sub, name+" "+sub.Name)
		}
	}
}

// writeManFlags writes one tagged paragraph per flag: its names in bold
// with their placeholder in italics, then its usage.
func writeManFlags(b *strings.Builder, flags []cli.Flag) {
	for _, f := range flags {
		names, usage := flagHelp(f)
		var forms []string
		for _, form := range strings.Split(names, ", ") {
			name, placeholder, ok := strings.Cut(form, " ")
			s := `\fB` + roff(name) + `\fR`
			if ok {
				s += ` \fI` + roff(placeholder) + `\fR`
			}
			forms = append(forms, s)
		}
		fmt.Fprintf(b, ".TP\n%s\n%s\n", strings.Join(forms, ", "), roff(usage))
	}
}

// slimManPage is the manual page of one of the small programs beside
// poolagent, poolagent-run(1) or poolagent-oci(1), written from the help
// its --help prints: synopsis, description and options (the part after
// "Options:", kept as printed).
func slimManPage(name, summary, argsUsage, help string) string {
	var b strings.Builder
	b.WriteString(".TH " + roff(strings.ToUpper(name)) + " 1\n.SH NAME\n" + roff(name) + " \\- " + roff(summary) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B " + roff(name) + "\n" + roff(argsUsage) + "\n.SH DESCRIPTION\n")
	desc, opts, _ := strings.Cut(help, "\n\nOptions:\n")
	for i, para := range strings.Split(desc, "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		b.WriteString(roff(para) + "\n")
	}
	b.WriteString(".SH OPTIONS\n.nf\n" + roff(opts) + "\n.fi\n.SH SEE ALSO\npoolagent(1)\n")
	return b.String()
}

// roff escapes text for a man page: backslashes, hyphens (a minus, so
// that options copy as typed) and a line's leading dot or quote.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
