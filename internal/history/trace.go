package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// TraceFormat is the "format" of every trace file.
const TraceFormat = "poolagent-trace"

// TraceVersion is the "version" this package writes and reads. A reader
// refuses other versions rather than guess what their fields mean.
const TraceVersion = 1

// Bounds on a trace, so that a file a local user hands to advise cannot
// make it run out of memory or search for hours.
const (
	// MaxTraceBytes is the largest trace file read.
	MaxTraceBytes = 32 << 20
	// MaxSamples is the most samples a trace holds: 10 hours at 1 s, or
	// 100 minutes at 100 ms.
	MaxSamples = 60_000
	// MaxThreads is the most threads a sample may report; record stops
	// reading threads beyond it.
	MaxThreads = 4096
	// MaxCPUs is the most CPUs a trace may describe.
	MaxCPUs = 1024
)

// Trace is what `poolagent record` wrote: one pool's kernel counters in
// consecutive intervals of a live host, with the limits in force and the
// kernel settings the model needs to replay it. Times are microseconds.
// docs/advise.md documents the file.
type Trace struct {
	// Format is TraceFormat.
	Format string `json:"format"`
	// Version is TraceVersion.
	Version int `json:"version"`
	// Pool is the pool's name (its cgroup directory below the pool root).
	Pool string `json:"pool"`
	// Cgroup is "v1" or "v2", the interface the counters came from.
	Cgroup string `json:"cgroup"`
	// CPUs is how many CPUs the pool's threads may run on.
	CPUs int `json:"cpus"`
	// NodeCPUs is the node's vCPUs, of which
	// TOTAL_CPU_LIMIT_PERCENT_PER_NODE is a percent.
	NodeCPUs float64 `json:"node_cpus"`
	// SliceUsec is /proc/sys/kernel/sched_cfs_bandwidth_slice_us.
	SliceUsec int64 `json:"slice_usec"`
	// TickUsec is the scheduler tick, 1e6/CONFIG_HZ.
	TickUsec int64 `json:"tick_usec"`
	// Limit is the pool's CPU limit while it was recorded: quota (Max
	// for none), period and burst; Weight is not recorded.
	Limit cpulimit.Limit `json:"-"`
	// QueryLimit is the limit of each query cgroup below the pool (the
	// pool's query template), when known: the daemon's history records
	// it, `poolagent record` does not. With it the replay runs the pool's
	// work in query cgroups as well (docs/advise.md, Levels).
	QueryLimit *cpulimit.Limit `json:"-"`
	// IntervalUsec is the length of every sample's interval.
	IntervalUsec int64 `json:"interval_usec"`
	// StartUnixUsec is when the first sample's interval started (µs since
	// the epoch); 0 when not known. The daemon's history sets it.
	StartUnixUsec int64 `json:"-"`
	// Samples are consecutive intervals, the first starting when the
	// recording started.
	Samples []Sample `json:"samples"`
}

// traceJSON is a Trace as the file holds it: the limit as its three
// cgroup values, in µs.
type traceJSON struct {
	Format        string     `json:"format"`
	Version       int        `json:"version"`
	Pool          string     `json:"pool"`
	Cgroup        string     `json:"cgroup"`
	CPUs          int        `json:"cpus"`
	NodeCPUs      float64    `json:"node_cpus"`
	SliceUsec     int64      `json:"slice_usec"`
	TickUsec      int64      `json:"tick_usec"`
	Limit         limitJSON  `json:"limit"`
	QueryLimit    *limitJSON `json:"query_limit,omitempty"`
	IntervalUsec  int64      `json:"interval_usec"`
	StartUnixUsec int64      `json:"start_unix_usec,omitempty"`
	Samples       []Sample   `json:"samples"`
}

// limitJSON is the trace's "limit": cpu.max ("QUOTA PERIOD", quota -1
// for "max") and cpu.max.burst.
type limitJSON struct {
	QuotaUsec  int64 `json:"quota_usec"`
	PeriodUsec int64 `json:"period_usec"`
	BurstUsec  int64 `json:"burst_usec"`
}

// MarshalJSON writes the trace in the file's layout.
func (t Trace) MarshalJSON() ([]byte, error) {
	var q *limitJSON
	if t.QueryLimit != nil {
		q = &limitJSON{t.QueryLimit.QuotaUsec, t.QueryLimit.PeriodUsec, t.QueryLimit.BurstUsec}
	}
	return json.Marshal(traceJSON{QueryLimit: q, Format: t.Format, Version: t.Version, Pool: t.Pool, Cgroup: t.Cgroup, CPUs: t.CPUs, NodeCPUs: t.NodeCPUs,
		SliceUsec: t.SliceUsec, TickUsec: t.TickUsec, Limit: limitJSON{t.Limit.QuotaUsec, t.Limit.PeriodUsec, t.Limit.BurstUsec},
		IntervalUsec: t.IntervalUsec, StartUnixUsec: t.StartUnixUsec, Samples: t.Samples})
}

// UnmarshalJSON reads the file's layout.
func (t *Trace) UnmarshalJSON(b []byte) error {
	var f traceJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*t = f.trace()
	return nil
}

// trace is the Trace the file's layout holds.
func (f traceJSON) trace() Trace {
	var q *cpulimit.Limit
	if f.QueryLimit != nil {
		q = &cpulimit.Limit{QuotaUsec: f.QueryLimit.QuotaUsec, PeriodUsec: f.QueryLimit.PeriodUsec, BurstUsec: f.QueryLimit.BurstUsec}
	}
	return Trace{QueryLimit: q, Format: f.Format, Version: f.Version, Pool: f.Pool, Cgroup: f.Cgroup, CPUs: f.CPUs, NodeCPUs: f.NodeCPUs,
		SliceUsec: f.SliceUsec, TickUsec: f.TickUsec, Limit: cpulimit.Limit{QuotaUsec: f.Limit.QuotaUsec, PeriodUsec: f.Limit.PeriodUsec, BurstUsec: f.Limit.BurstUsec},
		IntervalUsec: f.IntervalUsec, StartUnixUsec: f.StartUnixUsec, Samples: f.Samples}
}

// Sample is what the pool's counters grew by in one interval (the pool's
// cpu.stat, usage including its queries), and what its threads did.
type Sample struct {
	UsageUsec     uint64 `json:"usage_usec"`
	NrPeriods     uint64 `json:"nr_periods"`
	NrThrottled   uint64 `json:"nr_throttled"`
	ThrottledUsec uint64 `json:"throttled_usec"`
	NrBursts      uint64 `json:"nr_bursts"`
	BurstUsec     uint64 `json:"burst_usec"`
	// Threads is how many threads the pool and its queries held at the
	// interval's end, or Ran if more; -1 when they could not be read.
	Threads int `json:"threads"`
	// Ran is how many threads ran in the interval (their run time in
	// /proc/TID/schedstat grew by at least 1% of the interval, read
	// several times an interval, so threads that ended count too): the
	// pool's parallelism. -1: unknown.
	Ran int `json:"ran"`
	// Runnable is how many were runnable (state R) at the interval's end;
	// -1: unknown.
	Runnable int `json:"runnable"`
	// PressureSomeUsec is what cpu.pressure's "some total" grew by: the
	// time at least one of the pool's threads waited for a CPU. Absent
	// where the kernel has no PSI for the pool (cgroup v1).
	PressureSomeUsec *uint64 `json:"pressure_some_usec,omitempty"`
	// QueryNrThrottled is the most periods any one of the pool's query
	// cgroups was throttled in by its own limit in the interval, and
	// QueryThrottledUsec their throttled time summed: throttling at the
	// query level, which the pool's own counters do not show
	// (docs/advise.md, Levels). Absent (0) in a trace of `poolagent
	// record`, which reads the pool alone.
	QueryNrThrottled   uint64 `json:"query_nr_throttled,omitempty"`
	QueryThrottledUsec uint64 `json:"query_throttled_usec,omitempty"`
}

// Throttled reports whether the interval was throttled at either level.
func (s Sample) Throttled() bool {
	return s.NrThrottled > 0 || s.ThrottledUsec > 0 || s.QueryNrThrottled > 0 || s.QueryThrottledUsec > 0
}

// ThrottledEitherUsec is the interval's throttled time at both levels, summed.
func (s Sample) ThrottledEitherUsec() uint64 { return s.ThrottledUsec + s.QueryThrottledUsec }

// NrThrottledEither is the periods of the interval throttled at either
// level: the more of the pool's nr_throttled and the most of one query's,
// at most nr_periods (at least one: a query's period may be booked in an
// interval where the pool's is not). It is exact when the interval is one period (the
// daemon's history by default), and otherwise a lower bound: the two
// levels' periods are not told apart.
func (s Sample) NrThrottledEither() uint64 {
	return min(max(s.NrThrottled, s.QueryNrThrottled), max(s.NrPeriods, 1))
}

// TraceError is a trace file the reader refused: where and why.
type TraceError struct {
	// File is the name the trace was read under.
	File string
	// Where is the JSON field ("samples[12].threads"), "line 3, column 7"
	// for a syntax error, or "" for the file as a whole.
	Where string
	// Msg says what is wrong and what would be accepted.
	Msg string
}

// Error reads like `trace.json: samples[12].threads: -2 is not accepted
// (accepted: -1 for unknown, or 0..4096)`.
func (e *TraceError) Error() string {
	if e.Where == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Where + ": " + e.Msg
}

// poolName is what a pool's name may be (planner's rule for pool names).
var poolName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

// Ticks are the scheduler ticks a trace may hold: 1e6/CONFIG_HZ for the
// values the kernel's configuration offers (HZ_100, HZ_250, HZ_300,
// HZ_1000).
var Ticks = []int64{10_000, 4_000, 3_333, 1_000}

// MinNodeCPUs is the smallest node a trace may describe, in vCPUs.
const MinNodeCPUs = 0.01

// maxQuoted is how much of a value from the file an error quotes.
const maxQuoted = 64

// Quoted is s as Go quotes it, cut to its first 64 bytes (and saying how
// long it was) so that an error never echoes a huge value.
func Quoted(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(strings.ToValidUTF8(s[:maxQuoted], "")), len(s))
}

// ParseTrace reads a trace from r; name is used in errors. It reads at
// most MaxTraceBytes and refuses a file that is truncated, is not a
// poolagent trace of TraceVersion, or holds a value out of range, with a
// *TraceError saying where and what is accepted.
func ParseTrace(name string, r io.Reader) (*Trace, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxTraceBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", name, err)
	}
	if len(b) > MaxTraceBytes {
		return nil, &TraceError{File: name, Msg: fmt.Sprintf("larger than %d MiB (accepted: a trace of at most %d samples, as poolagent record writes)", MaxTraceBytes>>20, MaxSamples)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &TraceError{File: name, Msg: "empty (accepted: a JSON trace written by poolagent record)"}
	}
	// The file's layout is decoded directly (Trace's UnmarshalJSON
	// would scan the bytes once more).
	var f traceJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, jsonError(name, b, err)
	}
	t := f.trace()
	if _, err := dec.Token(); err != io.EOF {
		return nil, &TraceError{File: name, Where: position(b, int(dec.InputOffset())), Msg: "text after the trace's closing brace (accepted: one JSON object)"}
	}
	if err := t.Validate(); err != nil {
		var te *TraceError
		if errors.As(err, &te) {
			te.File = name
		}
		return nil, err
	}
	return &t, nil
}

// jsonError turns a decoding error into a *TraceError with a position.
func jsonError(name string, b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return &TraceError{File: name, Where: position(b, len(b)), Msg: "the trace ends early, it was cut off (accepted: a complete trace; poolagent record writes the file whole when it stops)"}
	case errors.As(err, &syn):
		return &TraceError{File: name, Where: position(b, int(syn.Offset)-1), Msg: fmt.Sprintf("not JSON: %v (accepted: a JSON trace written by poolagent record)", syn)}
	case errors.As(err, &typ):
		return &TraceError{File: name, Where: typ.Field, Msg: fmt.Sprintf("a JSON %s where a %s belongs (accepted: see docs/advise.md)", typ.Value, typ.Type)}
	}
	return &TraceError{File: name, Msg: err.Error()}
}

// position renders byte offset off of b as "line L, column C" (1-based).
func position(b []byte, off int) string {
	off = min(max(off, 0), len(b))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(b[:off], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

func bad(where, msg string, args ...any) error {
	return &TraceError{Where: where, Msg: fmt.Sprintf(msg, args...)}
}

// ValidateHeader reports the first value outside Samples that is out of
// range, as a *TraceError (without File), or nil.
func (t *Trace) ValidateHeader() error {
	switch {
	case t.Format != TraceFormat:
		return bad("format", "%s is not a poolagent trace (accepted: %q)", Quoted(t.Format), TraceFormat)
	case t.Version != TraceVersion:
		return bad("version", "%d is not a version this poolagent reads (accepted: %d)", t.Version, TraceVersion)
	case !poolName.MatchString(t.Pool):
		return bad("pool", "%s is not a pool name (accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-')", Quoted(t.Pool))
	case t.Cgroup != "v1" && t.Cgroup != "v2":
		return bad("cgroup", "%s (accepted: v1 or v2)", Quoted(t.Cgroup))
	case t.CPUs < 1 || t.CPUs > MaxCPUs:
		return bad("cpus", "%d (accepted: 1..%d)", t.CPUs, MaxCPUs)
	case !(t.NodeCPUs >= MinNodeCPUs) || t.NodeCPUs > MaxCPUs:
		return bad("node_cpus", "%v (accepted: a number of vCPUs from %v to %d)", t.NodeCPUs, MinNodeCPUs, MaxCPUs)
	case t.SliceUsec < 1 || t.SliceUsec > 1_000_000:
		return bad("slice_usec", "%d (accepted: 1..1000000, the kernel's sched_cfs_bandwidth_slice_us)", t.SliceUsec)
	case !slices.Contains(Ticks, t.TickUsec):
		return bad("tick_usec", "%d (accepted: 10000, 4000, 3333 or 1000: 1e6/CONFIG_HZ for HZ 100, 250, 300 or 1000)", t.TickUsec)
	case t.Limit.PeriodUsec < 1000 || t.Limit.PeriodUsec > 1_000_000:
		return bad("limit.period_usec", "%d (accepted: 1000..1000000, the periods the kernel accepts)", t.Limit.PeriodUsec)
	case t.Limit.QuotaUsec != cpulimit.Max && (t.Limit.QuotaUsec < 1000 || t.Limit.QuotaUsec > t.Limit.PeriodUsec*MaxCPUs):
		return bad("limit.quota_usec", "%d (accepted: -1 for max, or 1000..period x %d)", t.Limit.QuotaUsec, MaxCPUs)
	case t.Limit.BurstUsec < 0 || (t.Limit.BurstUsec > 0 && t.Limit.BurstUsec > t.Limit.QuotaUsec):
		return bad("limit.burst_usec", "%d (accepted: 0..quota_usec; no burst without a quota)", t.Limit.BurstUsec)
	case t.QueryLimit != nil && t.QueryLimit.PeriodUsec != t.Limit.PeriodUsec:
		return bad("query_limit.period_usec", "%d (accepted: the pool's period, %d: a query cgroup has its pool's period)", t.QueryLimit.PeriodUsec, t.Limit.PeriodUsec)
	case t.QueryLimit != nil && t.QueryLimit.QuotaUsec != cpulimit.Max && (t.QueryLimit.QuotaUsec < 1000 || t.QueryLimit.QuotaUsec > t.Limit.PeriodUsec*MaxCPUs):
		return bad("query_limit.quota_usec", "%d (accepted: -1 for max, or 1000..period x %d)", t.QueryLimit.QuotaUsec, MaxCPUs)
	case t.QueryLimit != nil && (t.QueryLimit.BurstUsec < 0 || (t.QueryLimit.BurstUsec > 0 && t.QueryLimit.BurstUsec > t.QueryLimit.QuotaUsec)):
		return bad("query_limit.burst_usec", "%d (accepted: 0..quota_usec; no burst without a quota)", t.QueryLimit.BurstUsec)
	case t.StartUnixUsec < 0:
		return bad("start_unix_usec", "%d (accepted: 0 for unknown, or µs since 1970)", t.StartUnixUsec)
	case t.IntervalUsec < 1000 || t.IntervalUsec > 60_000_000:
		return bad("interval_usec", "%d (accepted: 1000..60000000, 1 ms..1 min)", t.IntervalUsec)
	case t.Limit.QuotaUsec > cpulimit.MinQuotaUsec && t.Limit.VCPU() > t.NodeCPUs*1.005:
		return bad("limit.quota_usec", "%d per %d µs is %.4g vCPUs, more than the node's node_cpus %v (accepted: a cap of at most the whole node, as a pool file's TOTAL_CPU_LIMIT_PERCENT_PER_NODE)",
			t.Limit.QuotaUsec, t.Limit.PeriodUsec, t.Limit.VCPU(), t.NodeCPUs)
	}
	return nil
}

// Validate reports the first value of t out of range as a *TraceError
// (without File), or nil.
func (t *Trace) Validate() error {
	if err := t.ValidateHeader(); err != nil {
		return err
	}
	switch {
	case len(t.Samples) == 0:
		return bad("samples", "none (accepted: at least one interval; record for longer)")
	case len(t.Samples) > MaxSamples:
		return bad("samples", "%d (accepted: at most %d; record a shorter time or a longer interval)", len(t.Samples), MaxSamples)
	}
	// A sample may be read up to one interval late (a busy host), so the
	// bounds are those of two intervals.
	span := 2 * t.IntervalUsec
	cpuTime := uint64(span) * uint64(t.CPUs)
	maxPeriods := uint64(span/t.Limit.PeriodUsec) + 2
	maxThrottled := cpuTime + uint64(t.Limit.PeriodUsec)*uint64(t.CPUs)
	for i, s := range t.Samples {
		at := func(field string) string { return fmt.Sprintf("samples[%d].%s", i, field) }
		switch {
		case s.UsageUsec > cpuTime:
			return bad(at("usage_usec"), "%d is more than %d CPUs can run in two intervals (accepted: 0..%d)", s.UsageUsec, t.CPUs, cpuTime)
		case s.ThrottledUsec > maxThrottled:
			return bad(at("throttled_usec"), "%d is more than %d CPUs can be throttled around two intervals (accepted: 0..%d)", s.ThrottledUsec, t.CPUs, maxThrottled)
		case s.NrThrottled > s.NrPeriods:
			return bad(at("nr_throttled"), "%d is more than nr_periods %d (accepted: 0..nr_periods)", s.NrThrottled, s.NrPeriods)
		case s.NrPeriods > maxPeriods:
			return bad(at("nr_periods"), "%d periods of %d µs cannot fit in two intervals of %d µs (accepted: 0..%d)", s.NrPeriods, t.Limit.PeriodUsec, t.IntervalUsec, maxPeriods)
		case s.Threads < -1 || s.Threads > MaxThreads:
			return bad(at("threads"), "%d (accepted: -1 for unknown, or 0..%d)", s.Threads, MaxThreads)
		case s.Ran < -1 || s.Ran > MaxThreads || (s.Threads >= 0 && s.Ran > s.Threads):
			return bad(at("ran"), "%d (accepted: -1 for unknown, or 0..threads)", s.Ran)
		case s.Runnable < -1 || s.Runnable > MaxThreads || (s.Threads >= 0 && s.Runnable > s.Threads):
			return bad(at("runnable"), "%d (accepted: -1 for unknown, or 0..threads)", s.Runnable)
		case s.QueryNrThrottled > maxPeriods:
			return bad(at("query_nr_throttled"), "%d periods of %d µs cannot fit in two intervals of %d µs (accepted: 0..%d)", s.QueryNrThrottled, t.Limit.PeriodUsec, t.IntervalUsec, maxPeriods)
		case s.QueryThrottledUsec > maxThrottled:
			return bad(at("query_throttled_usec"), "%d is more than %d CPUs can be throttled around two intervals (accepted: 0..%d)", s.QueryThrottledUsec, t.CPUs, maxThrottled)
		case s.PressureSomeUsec != nil && *s.PressureSomeUsec > uint64(t.IntervalUsec)*2:
			return bad(at("pressure_some_usec"), "%d is more than twice the interval (accepted: 0..%d)", *s.PressureSomeUsec, 2*t.IntervalUsec)
		}
	}
	return nil
}

// WriteTrace writes t as indented JSON, one sample per line.
func WriteTrace(w io.Writer, t *Trace) error {
	head := *t
	head.Samples = nil
	b, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return err
	}
	// Replace the "samples": null the header ends with by the list, one
	// sample per line, so that a trace reads (and diffs) line by line.
	b = bytes.TrimSuffix(bytes.TrimSpace(b), []byte("\n}"))
	b = bytes.TrimSuffix(b, []byte(`"samples": null`))
	var buf bytes.Buffer
	buf.Write(b)
	buf.WriteString("\"samples\": [\n")
	for i, s := range t.Samples {
		line, err := json.Marshal(s)
		if err != nil {
			return err
		}
		buf.WriteString("    ")
		buf.Write(line)
		if i < len(t.Samples)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("  ]\n}\n")
	_, err = w.Write(buf.Bytes())
	return err
}
