package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/advise"
	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/protocol"
)

// historyFlags are the flags that read the daemon's history instead of a
// trace file.
func historyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "since", Usage: "read the daemon's history of the last `DURATION` (e.g. 30m; default: all it keeps)"},
		&cli.StringFlag{Name: "socket", Value: protocol.DefaultSocket, Usage: "the daemon's socket `PATH`"},
	}
}

// daemonTraces asks the daemon for its history of pool (of every pool of
// the node, one at a time, when ""), and returns, per pool in the
// daemon's order, its latest trace and how many earlier stretches under
// other limits the window holds.
func daemonTraces(c *cli.Context, pool string) (latest []*history.Trace, earlier map[string]int, err error) {
	since := c.Duration("since")
	if since < 0 {
		return nil, nil, usageErr("--since %s is not accepted (accepted: a positive duration such as 30m)", since)
	}
	pools := []string{pool}
	if pool == "" {
		r, err := client.Ask(c.String("socket"), protocol.Request{Op: protocol.OpPools, Local: true})
		if err != nil {
			return nil, nil, err
		}
		pools = nil
		for _, p := range r.Pools {
			pools = append(pools, p.Name)
		}
	}
	earlier = map[string]int{}
	for _, p := range pools {
		r, err := client.Ask(c.String("socket"), protocol.Request{Op: protocol.OpHistory, Pool: p, SinceUsec: since.Microseconds()})
		var refused *client.RefusedError
		if pool == "" && errors.As(err, &refused) && refused.Code == protocol.CodeUnknownPool {
			continue // a pool made since the view was read, or one not sampled yet
		}
		if err != nil {
			return nil, nil, err
		}
		for i, raw := range r.Traces {
			t, err := history.ParseTrace(fmt.Sprintf("the daemon's history of pool %s (trace %d)", p, i+1), bytes.NewReader(raw))
			if err != nil {
				return nil, nil, err
			}
			if i > 0 {
				latest[len(latest)-1] = t
				earlier[t.Pool]++
				continue
			}
			latest = append(latest, t)
		}
	}
	if pool != "" && len(latest) == 0 {
		return nil, nil, fmt.Errorf("--pool %s: the daemon's history holds no whole interval of it yet (it samples each pool once a period, at least every %s)", pool, 100*time.Millisecond)
	}
	return latest, earlier, nil
}

// fromDaemonNote says which stretch of the history a report is about.
func fromDaemonNote(t *history.Trace, earlier int) string {
	span := time.Duration(int64(len(t.Samples))*t.IntervalUsec) * time.Microsecond
	s := fmt.Sprintf("from the daemon's history: the last %s of pool %s", span, t.Pool)
	if t.StartUnixUsec > 0 {
		s += fmt.Sprintf(" (since %s)", time.UnixMicro(t.StartUnixUsec).Format("15:04:05"))
	}
	if earlier > 0 {
		s += fmt.Sprintf("; %d earlier stretches under other limits are left out (a trace holds one limit)", earlier)
	}
	return s + "\n"
}

// adviseAll advises every pool of the daemon's history, worst first.
func adviseAll(c *cli.Context, b advise.Budget) error {
	format, err := formatOf(c, "text", "json")
	if err != nil {
		return err
	}
	traces, _, err := daemonTraces(c, "")
	if err != nil {
		return err
	}
	pools, err := advise.AdviseNode(traces, b)
	if err != nil {
		return err
	}
	if file := c.String("report"); file != "" {
		var page bytes.Buffer
		if err := advise.WriteNodeHTML(&page, pools, b); err != nil {
			return err
		}
		if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	if format == "json" {
		return advise.WriteNodeJSON(c.App.Writer, pools, b)
	}
	return advise.WriteNode(c.App.Writer, pools, b)
}

// recordFromDaemon writes the daemon's history of pool as a trace file.
func recordFromDaemon(c *cli.Context, pool, out string) error {
	if c.IsSet("for") || c.IsSet("interval") {
		return errors.New("--from-daemon writes what the daemon kept: --for and --interval do not apply (accepted: --since)")
	}
	ts, earlier, err := daemonTraces(c, pool)
	if err != nil {
		return err
	}
	if err := writeTraceFile(out, ts[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "poolagent record: %s: %d intervals written to %s", strings.TrimSuffix(fromDaemonNote(ts[0], earlier[pool]), "\n"), len(ts[0].Samples), out)
	fmt.Fprintln(c.App.ErrWriter)
	return nil
}
