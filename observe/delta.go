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
