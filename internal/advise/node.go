package advise

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/history"
)

// PoolAdvice is one pool of a node-wide report (`poolagent advise --all`).
type PoolAdvice struct {
	Trace     *history.Trace
	Diagnosis Diagnosis
	// Advice is nil when the trace was too long to replay (Refused).
	Advice *Advice
	// Refused says why there is no advice; "" when there is.
	Refused string
}

// OverBudget reports whether the pool's measured counters are outside b.
func (p PoolAdvice) OverBudget(b Budget) bool { return !b.Meets(Measured(p.Trace)) }

// AdviseNode advises every trace (one per pool) on b and orders them
// worst first: the larger share of throttled periods, then the longer
// worst delay, then the name.
func AdviseNode(traces []*history.Trace, b Budget) ([]PoolAdvice, error) {
	out := make([]PoolAdvice, 0, len(traces))
	for _, t := range traces {
		p := PoolAdvice{Trace: t, Diagnosis: Diagnose(t, b)}
		a, err := Advise(t, b)
		var long *TraceTooLongError
		switch {
		case errors.As(err, &long):
			p.Refused = err.Error()
		case err != nil:
			return nil, err
		}
		p.Advice = a
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(x, y PoolAdvice) int {
		mx, my := Measured(x.Trace), Measured(y.Trace)
		return cmp.Or(cmp.Compare(my.ThrottledRatio(), mx.ThrottledRatio()), cmp.Compare(my.MaxDelayUsec, mx.MaxDelayUsec),
			strings.Compare(x.Trace.Pool, y.Trace.Pool))
	})
	return out, nil
}

// summary is the pool's diagnosis in one line: its throttling and the
// mechanism that matters most.
func (p PoolAdvice) summary() string {
	m := Measured(p.Trace)
	if p.Trace.Limit.QuotaUsec < 0 {
		return "no CPU limit"
	}
	if m.NrThrottled == 0 && m.ThrottledUsec == 0 {
		return "no period throttled"
	}
	why := "throttled"
	if len(p.Diagnosis.Mechanisms) > 0 {
		var names []string
		for _, mech := range p.Diagnosis.Mechanisms {
			names = append(names, string(mech))
		}
		why = strings.Join(names, ", ")
	}
	return why
}

// alter is the statement advised for a pool over the budget, or what
// stands in for it.
func (p PoolAdvice) alter(b Budget) string {
	a := p.Advice
	switch {
	case !p.OverBudget(b) && (a == nil || !a.Disagrees):
		return ""
	case p.Refused != "":
		return "no advice: " + p.Refused
	case a.Choice == nil && a.Disagrees:
		return "no advice: the model does not reproduce the measured throttling"
	case a.Choice == nil && a.Stopped:
		return "no advice: the search stopped at its work budget"
	case a.Choice == nil:
		return "no setting up to the whole node meets the budget"
	case a.Choice == &a.Current:
		return "the model says the current setting meets the budget"
	}
	return a.Choice.Setting.Alter(a.Pool, a.Current.Setting)
}

// WriteNode writes a node-wide report: one line per pool, worst first,
// with its throttling, worst delay and diagnosis, and under a pool over
// the budget the statement that brings it within.
func WriteNode(w io.Writer, pools []PoolAdvice, b Budget) error {
	var s strings.Builder
	fmt.Fprintf(&s, "%d pools, worst first; budget: %s\n\n", len(pools), b)
	for _, p := range pools {
		t, m := p.Trace, Measured(p.Trace)
		mark := " "
		if p.OverBudget(b) {
			mark = "!"
		}
		fmt.Fprintf(&s, "%s %s: %s of periods throttled (%d of %d), worst delay %s, in %s: %s\n", mark, t.Pool,
			pct(m.ThrottledRatio()), m.NrThrottled, m.NrPeriods, msText(m.MaxDelayUsec),
			secText(uint64(len(t.Samples))*uint64(t.IntervalUsec)), p.summary())
		if alter := p.alter(b); alter != "" {
			fmt.Fprintf(&s, "    %s\n", alter)
		}
	}
	_, err := io.WriteString(w, s.String())
	return err
}

// nodeJSON is one pool of `poolagent advise --all --format json`.
type nodeJSON struct {
	Pool               string   `json:"pool"`
	OverBudget         bool     `json:"over_budget"`
	Intervals          int      `json:"intervals"`
	IntervalUsec       int64    `json:"interval_usec"`
	NrPeriods          uint64   `json:"nr_periods"`
	NrThrottled        uint64   `json:"nr_throttled"`
	ThrottledRatio     float64  `json:"throttled_ratio"`
	ThrottledUsec      uint64   `json:"throttled_usec"`
	QueryThrottledUsec uint64   `json:"query_throttled_usec"`
	MaxDelayUsec       int64    `json:"max_delay_usec"`
	Mechanisms         []string `json:"mechanisms"`
	Diagnosis          []string `json:"diagnosis"`
	// Alter is the advised statement; "" when none is needed or none
	// was found (Note says which).
	Alter          string   `json:"alter,omitempty"`
	Note           string   `json:"note,omitempty"`
	ModelDisagrees bool     `json:"model_disagrees"`
	SearchStopped  bool     `json:"search_stopped"`
	PredictedRatio *float64 `json:"predicted_ratio_advised,omitempty"`
}

// WriteNodeJSON writes the node-wide report as a JSON array, worst first.
func WriteNodeJSON(w io.Writer, pools []PoolAdvice, b Budget) error {
	rows := make([]nodeJSON, 0, len(pools))
	for _, p := range pools {
		m := Measured(p.Trace)
		r := nodeJSON{Pool: p.Trace.Pool, OverBudget: p.OverBudget(b), Intervals: len(p.Trace.Samples), IntervalUsec: p.Trace.IntervalUsec,
			NrPeriods: m.NrPeriods, NrThrottled: m.NrThrottled, ThrottledRatio: m.ThrottledRatio(), ThrottledUsec: m.ThrottledUsec,
			QueryThrottledUsec: m.QueryThrottledUsec, MaxDelayUsec: m.MaxDelayUsec, Mechanisms: []string{}, Diagnosis: p.Diagnosis.Lines}
		for _, mech := range p.Diagnosis.Mechanisms {
			r.Mechanisms = append(r.Mechanisms, string(mech))
		}
		alter := p.alter(b)
		if strings.HasPrefix(alter, "ALTER ") {
			r.Alter = alter
			ratio := p.Advice.Choice.Predicted.ThrottledRatio()
			r.PredictedRatio = &ratio
		} else {
			r.Note = alter
		}
		if a := p.Advice; a != nil {
			r.ModelDisagrees, r.SearchStopped = a.Disagrees, a.Stopped
		}
		rows = append(rows, r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}
