package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/simulate"
)

// simulateCommand is `poolagent simulate`: predict the throttling of a
// scenario file, or of the chapter's parallelism experiment by default.
func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "predict cpu.stat, periods and a timeline of throttling for a scenario (default: the chapter's parallelism experiment)",
		Description: "Runs the simple host model (docs/simulator.md) on a scenario file (docs/scenario.md)\n" +
			"and prints per group the cpu.stat counters, a table and a timeline of the first periods,\n" +
			"and per task when it finished and how long it was throttled.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "scenario", Aliases: []string{"s"}, Usage: "scenario `FILE` (default: built-in chapter parallelism example)"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "output format: text or json"},
			&cli.IntFlag{Name: "periods", Value: 3, Usage: "periods per group in the text tables and timelines (json has all)"},
		},
		Action: runSimulate,
	}
}

func runSimulate(c *cli.Context) error {
	format, err := formatOf(c, "text", "json")
	if err != nil {
		return err
	}
	periods := c.Int("periods")
	if periods < 1 {
		return usageErr("--periods %d is not accepted (accepted: 1 or more)", periods)
	}

	s, err := readScenario(c, simulate.BuiltinScenario(), "nothing simulated")
	if err != nil {
		return err
	}
	modelNote(c.App.ErrWriter, c.Command.Name, "/")

	trace := simulate.TimelineTicks(s.Host, periods)
	if format == "json" {
		trace = 0 // JSON has no timeline
	}
	run, err := simulate.RunHost(s.Host, simulate.HostOptions{TraceTicks: trace})
	if err != nil {
		return fmt.Errorf("simulate %s: %w", s.Name, err)
	}
	if format == "json" {
		return simulate.WriteJSON(c.App.Writer, s, run)
	}
	return simulate.WriteText(c.App.Writer, s, run, periods)
}

// modelNote says once on stderr which of the models' assumptions about
// how the kernel enforces cpu.max do not hold on the host below root
// (normally "/"; observe.ModelHost): a sched_ext scheduler, no CFS
// bandwidth control, a kernel older than the model, ... The tick and
// slice are the scenario's or the trace's, so the host's are not checked.
func modelNote(w io.Writer, command, root string) {
	if note := observe.ReadModelHost(root).Caveats().Mechanisms().String(); note != "" {
		fmt.Fprintf(w, "poolagent %s: note: %s\n", command, note)
	}
}

// readScenario parses the file of --scenario, or returns builtin without
// one. A bad file prints one "file:line: ..." line per problem on stderr,
// as compilers print them, and fails with a count and outcome, e.g.
// "nothing simulated".
func readScenario(c *cli.Context, builtin *simulate.Scenario, outcome string) (*simulate.Scenario, error) {
	path := c.String("scenario")
	if path == "" {
		return builtin, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	s, err := simulate.ParseScenario(path, src)
	if err != nil {
		var n int
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			fmt.Fprintln(c.App.ErrWriter, e)
			n++
		}
		return nil, fmt.Errorf("%s: %d %s, %s", path, n, plural(n, "error", "errors"), outcome)
	}
	return s, nil
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
