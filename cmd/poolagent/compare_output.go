package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/compare"
)

// writeReportFiles writes report to the files --report (HTML) and --json
// name, saying so on standard error.
func writeReportFiles(c *cli.Context, report *compare.Report) error {
	if path := c.String("report"); path != "" {
		if err := writeFile(path, func(w io.Writer) error { return compare.WriteHTML(w, report) }); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "poolagent compare: wrote the HTML report to %s\n", path)
	}
	if path := c.String("json"); path != "" {
		if err := writeFile(path, func(w io.Writer) error { return compare.WriteJSON(w, report) }); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "poolagent compare: wrote the JSON report to %s\n", path)
	}
	return nil
}

// writeCompare prints report on standard output in format.
func writeCompare(c *cli.Context, format string, report *compare.Report) error {
	switch format {
	case "json":
		return compare.WriteJSON(c.App.Writer, report)
	case "markdown":
		// Rows first, so that a report without measurements prints
		// nothing, not a header without rows.
		var rows strings.Builder
		label := "built-in default.scn"
		if path := c.String("scenario"); path != "" {
			label = filepath.Base(path)
		}
		if err := compare.WriteMarkdownRows(&rows, report, label); err != nil {
			return err
		}
		_, err := io.WriteString(c.App.Writer, compare.MarkdownHeader+rows.String())
		return err
	}
	return compare.WriteText(c.App.Writer, report, c.Int("periods"))
}

// writeFile writes a file through render, removing it again on error.
func writeFile(path string, render func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := errors.Join(render(f), f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}
