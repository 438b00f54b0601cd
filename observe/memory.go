package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// Memory is one cgroup's memory as the memory controller reports it, on
// cgroup v2 or v1 (package cgroupfs reads the files and hands them to the
// parsers below).
//
//	CurrentBytes  v2 memory.current; v1 memory.usage_in_bytes
//	PeakBytes     v2 memory.peak (Linux >= 5.19); v1 memory.max_usage_in_bytes; nil when the kernel has none
//	LimitBytes    v2 memory.max; v1 memory.limit_in_bytes; -1 = none
//	HighBytes     v2 memory.high (reclaim and throttling above it); v1 memory.soft_limit_in_bytes; -1 = none
//	MinBytes      v2 memory.min (the guarantee never reclaimed); 0 = none (and on v1), -1 = "max"
//	LowBytes      v2 memory.low (the guarantee reclaimed only when nothing else is left); as MinBytes
//	SwapBytes     v2 memory.swap.current; nil without swap accounting (and on v1)
//	Events        v2 memory.events; v1 memory.failcnt (as Max) and memory.oom_control's oom_kill
//	Pressure      v2 memory.pressure (PSI); nil on v1 and where PSI is off
//	Stat          a few lines of memory.stat
type Memory struct {
	CurrentBytes uint64       `json:"current_bytes"`
	PeakBytes    *uint64      `json:"peak_bytes,omitempty"`
	LimitBytes   int64        `json:"limit_bytes"`
	HighBytes    int64        `json:"high_bytes"`
	MinBytes     int64        `json:"min_bytes,omitempty"`
	LowBytes     int64        `json:"low_bytes,omitempty"`
	SwapBytes    *uint64      `json:"swap_bytes,omitempty"`
	Events       MemoryEvents `json:"events"`
	Pressure     *Pressure    `json:"pressure,omitempty"`
	Stat         MemoryStat   `json:"stat"`
	// V1 says the reading is of a cgroup v1 memory hierarchy, whose
	// events are failcnt and oom_kill only.
	V1 bool `json:"v1,omitempty"`
}

// OOMLimit says whether an OOM kill in a query's cgroup (q, read when
// the query ended) was the kernel enforcing the query's own limit
// ("query") or its pool's ("pool", from the pool's readings when the
// query started and when it ended), or neither (""): no kill, the host's
// own OOM killer, or a signal. On v2 the cgroup whose limit was reached
// counts an "oom" event, and the killed process's cgroup an "oom_kill";
// v1 counts neither event, so there a kill (oom_control's oom_kill) in a
// query whose usage hit its limit (failcnt) is the query's, and one while
// the pool's failcnt grew is the pool's.
func OOMLimit(q, poolBefore, poolAfter *Memory) string {
	if q == nil || q.Events.OOMKill == 0 {
		return ""
	}
	hit := func(m *Memory) uint64 {
		if m.V1 {
			if m.LimitBytes < 0 {
				return 0
			}
			return m.Events.Max
		}
		return m.Events.OOM
	}
	switch {
	case hit(q) > 0:
		return "query"
	case poolBefore != nil && poolAfter != nil && hit(poolAfter) > hit(poolBefore):
		return "pool"
	}
	return ""
}

// MemoryEvents are the counts of cgroup v2 memory.events, each of the
// cgroup and every cgroup below it:
//
//	low 0
//	high 12
//	max 3
//	oom 1
//	oom_kill 1
//	oom_group_kill 0
//
// High counts reclaims forced by memory.high (the cgroup was throttled);
// Max times usage was about to pass memory.max (reclaim followed); OOM
// times the limit was reached and reclaim failed, so the OOM killer was
// called for this cgroup's limit; OOMKill processes in the cgroup killed
// by any OOM killer, the host's own included. On cgroup v1, Max is
// memory.failcnt (charges that hit the limit), OOMKill memory.oom_control's
// oom_kill (Linux >= 4.13), and Low, High and OOM are 0.
type MemoryEvents struct {
	Low          uint64 `json:"low"`
	High         uint64 `json:"high"`
	Max          uint64 `json:"max"`
	OOM          uint64 `json:"oom"`
	OOMKill      uint64 `json:"oom_kill"`
	OOMGroupKill uint64 `json:"oom_group_kill"`
}

// MemoryStat is part of memory.stat, bytes: v2 anon, file and kernel;
// v1 rss (as Anon) and cache (as File), its kernel memory not being
// in memory.stat.
type MemoryStat struct {
	AnonBytes   uint64 `json:"anon_bytes"`
	FileBytes   uint64 `json:"file_bytes"`
	KernelBytes uint64 `json:"kernel_bytes"`
}

// ParseMemoryEvents parses a cgroup v2 memory.events (or
// memory.events.local) file: "key count" lines, unknown keys skipped.
func ParseMemoryEvents(b []byte) (MemoryEvents, error) {
	var e MemoryEvents
	_, err := parseKeyValues(b, map[string]*uint64{
		"low": &e.Low, "high": &e.High, "max": &e.Max, "oom": &e.OOM, "oom_kill": &e.OOMKill, "oom_group_kill": &e.OOMGroupKill,
	})
	if err != nil {
		return MemoryEvents{}, err
	}
	return e, nil
}

// ParseMemoryStat parses a cgroup v2 or v1 memory.stat file ("key bytes"
// lines): v2 anon, file and kernel; v1 rss and cache. Other keys, v1's
// total_* (hierarchical) ones among them, are skipped.
func ParseMemoryStat(b []byte) (MemoryStat, error) {
	var st MemoryStat
	_, err := parseKeyValues(b, map[string]*uint64{
		"anon": &st.AnonBytes, "file": &st.FileBytes, "kernel": &st.KernelBytes,
		"rss": &st.AnonBytes, "cache": &st.FileBytes,
	})
	if err != nil {
		return MemoryStat{}, err
	}
	return st, nil
}

// ParseOOMKills parses cgroup v1 memory.oom_control:
//
//	oom_kill_disable 0
//	under_oom 0
//	oom_kill 1
//
// and returns its oom_kill count, the processes of the cgroup the OOM
// killer ended; ok is false on a kernel without the line (before 4.13).
func ParseOOMKills(b []byte) (kills uint64, ok bool, err error) {
	seen, err := parseKeyValues(b, map[string]*uint64{"oom_kill": &kills})
	if err != nil {
		return 0, false, err
	}
	return kills, seen["oom_kill"], nil
}

// ParseBytes parses a memory file holding one unsigned count: v2
// memory.current, memory.peak and memory.swap.current; v1
// memory.usage_in_bytes, memory.max_usage_in_bytes and memory.failcnt.
func ParseBytes(b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want one unsigned integer", s)
	}
	return v, nil
}

// Sub is what m's counters grew by since prev, a reading of the same
// cgroup: the events and the pressure totals, each 0 when it went back
// (the cgroup was made anew in between). The gauges (current, peak,
// limits, swap, memory.stat) are m's.
func (m Memory) Sub(prev Memory) Memory {
	d := m
	e, p := m.Events, prev.Events
	d.Events = MemoryEvents{
		Low: counterDelta(e.Low, p.Low), High: counterDelta(e.High, p.High), Max: counterDelta(e.Max, p.Max),
		OOM: counterDelta(e.OOM, p.OOM), OOMKill: counterDelta(e.OOMKill, p.OOMKill), OOMGroupKill: counterDelta(e.OOMGroupKill, p.OOMGroupKill),
	}
	d.Pressure = m.Pressure.sub(prev.Pressure)
	return d
}
