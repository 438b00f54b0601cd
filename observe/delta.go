package observe

// Sub returns the counters accumulated between prev and s, field by field.
// If any counter went backwards the cgroup was removed and created again
// under the same name between the two reads, and s itself is the best
// delta there is.
func (s CPUStat) Sub(prev CPUStat) CPUStat {
	cur := []uint64{s.UsageUsec, s.UserUsec, s.SystemUsec, s.NrPeriods, s.NrThrottled, s.ThrottledUsec, s.NrBursts, s.BurstUsec}
	old := []uint64{prev.UsageUsec, prev.UserUsec, prev.SystemUsec, prev.NrPeriods, prev.NrThrottled, prev.ThrottledUsec, prev.NrBursts, prev.BurstUsec}
	for i := range cur {
		if cur[i] < old[i] {
			return s
		}
	}
	return CPUStat{
		UsageUsec:     s.UsageUsec - prev.UsageUsec,
		UserUsec:      s.UserUsec - prev.UserUsec,
		SystemUsec:    s.SystemUsec - prev.SystemUsec,
		NrPeriods:     s.NrPeriods - prev.NrPeriods,
		NrThrottled:   s.NrThrottled - prev.NrThrottled,
		ThrottledUsec: s.ThrottledUsec - prev.ThrottledUsec,
		NrBursts:      s.NrBursts - prev.NrBursts,
		BurstUsec:     s.BurstUsec - prev.BurstUsec,
	}
}

// ThrottledRatio returns the share of active periods in which the group
// was throttled, NrThrottled/NrPeriods, or 0 when there were no periods.
func (s CPUStat) ThrottledRatio() float64 {
	if s.NrPeriods == 0 {
		return 0
	}
	return float64(s.NrThrottled) / float64(s.NrPeriods)
}

// Sub is what s's counters grew by since prev, a sample of the same
// group: cpu.stat as [CPUStat.Sub] takes it, cpu.stat.local's throttled
// time when both samples have it and it did not go back, and the pressure
// totals when both have them (0 for one that went back: the cgroup was
// made anew in between), and memory as [Memory.Sub] takes it. A group new since prev (zero prev) counts from
// its creation.
func (s Sample) Sub(prev Sample) Sample {
	d := s
	d.CPU = s.CPU.Sub(prev.CPU)
	if s.LocalThrottledUsec != nil && prev.LocalThrottledUsec != nil && *s.LocalThrottledUsec >= *prev.LocalThrottledUsec {
		v := *s.LocalThrottledUsec - *prev.LocalThrottledUsec
		d.LocalThrottledUsec = &v
	}
	d.Pressure = s.Pressure.sub(prev.Pressure)
	if s.Memory != nil && prev.Memory != nil {
		m := s.Memory.Sub(*prev.Memory)
		d.Memory = &m
	}
	return d
}

// sub is what p's totals grew by since prev, its averages p's own; p
// when prev is nil (s's own value is then kept, as the delta of a
// pressure file that appeared), nil when p is.
func (p *Pressure) sub(prev *Pressure) *Pressure {
	if p == nil || prev == nil {
		return p
	}
	d := *p
	d.Some.TotalUsec = counterDelta(p.Some.TotalUsec, prev.Some.TotalUsec)
	if p.Full != nil && prev.Full != nil {
		full := *p.Full
		full.TotalUsec = counterDelta(p.Full.TotalUsec, prev.Full.TotalUsec)
		d.Full = &full
	}
	return &d
}

// counterDelta is what a counter grew by; 0 when it went back.
func counterDelta(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

// Deltas is what each sample of cur grew by since prev, an earlier read
// of the same tree, in cur's order: each as [Sample.Sub] takes it against
// prev's sample of the same group, a group new since prev counting from
// its creation.
func Deltas(cur, prev []Sample) []Sample {
	before := make(map[string]Sample, len(prev))
	for _, s := range prev {
		before[s.Group] = s
	}
	out := make([]Sample, 0, len(cur))
	for _, s := range cur {
		out = append(out, s.Sub(before[s.Group]))
	}
	return out
}
