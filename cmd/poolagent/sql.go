package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/protocol"
)

// sqlCommand is `poolagent sql`: run-time DDL sent to the daemon.
func sqlCommand() *cli.Command {
	return &cli.Command{
		Name:      "sql",
		Usage:     "change pools, classifiers and grants at run time: send DDL to the daemon (administrators only)",
		ArgsUsage: " ",
		Description: "Sends CREATE/ALTER/DROP RESOURCE POOL [CLASSIFIER], GRANT and REVOKE statements to the\n" +
			"daemon, which applies them to the pools in force all or nothing, writes them to its state\n" +
			"directory (so they survive restarts and reloads) and reconciles the cgroups. Only root,\n" +
			"the admin group and grantees of administration may change pools; the daemon takes the\n" +
			"caller's identity from the socket's peer credentials. A refused statement is reported\n" +
			"as SOURCE:LINE:COL: problem, and nothing is changed. See docs/operate.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "execute", Aliases: []string{"e"}, Usage: "the `DDL` to run"},
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the DDL from `FILE` ('-': standard input)"},
			&cli.StringFlag{Name: "socket", Value: protocol.DefaultSocket, Usage: "the daemon's socket `PATH`"},
		},
		Action: runSQL,
	}
}

func runSQL(c *cli.Context) error {
	req := protocol.Request{Op: protocol.OpSQL}
	switch e, f := c.String("execute"), c.String("file"); {
	case c.NArg() > 0:
		return usageErr("unexpected argument %q (give the DDL with -e 'DDL' or -f FILE)", c.Args().First())
	case (e == "") == (f == ""):
		return errors.New("sql: give one of -e 'DDL' or -f FILE")
	case e != "":
		req.SQL, req.Source = e, "-e"
	case f == "-":
		b, err := io.ReadAll(c.App.Reader)
		if err != nil {
			return fmt.Errorf("sql: read standard input: %w", err)
		}
		req.SQL, req.Source = string(b), "<stdin>"
	default:
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("sql: %w", err)
		}
		req.SQL, req.Source = string(b), f
	}
	r, err := client.Ask(c.String("socket"), req)
	for _, w := range r.Warnings {
		fmt.Fprintln(c.App.ErrWriter, w)
	}
	var refused *client.RefusedError
	if errors.As(err, &refused) && refused.Code == protocol.CodeInvalidDDL {
		fmt.Fprintln(c.App.ErrWriter, refused.Message)
		n := strings.Count(refused.Message, "\n") + 1
		return fmt.Errorf("%s: %d %s, nothing changed", req.Source, n, plural(n, "error", "errors"))
	}
	if errors.Is(err, client.ErrNoAnswer) {
		return fmt.Errorf("sql: %w\nthe change may have been applied and saved before the connection dropped: "+
			"look at `poolagent pools` and `poolagent classifiers` (or the daemon's log) before sending it again", err)
	}
	if err != nil {
		return err
	}
	where := r.Change.SavedIn
	if where == "" {
		where = "the daemon's state directory"
	}
	fmt.Fprintf(c.App.Writer, "change %d applied and saved in %s\n", r.Change.Seq, where)
	return nil
}
