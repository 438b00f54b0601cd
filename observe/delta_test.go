package observe

import (
	"reflect"
	"testing"
)

func TestCPUStatSub(t *testing.T) {
	prev := CPUStat{UsageUsec: 100, UserUsec: 60, SystemUsec: 40, NrPeriods: 10, NrThrottled: 2, ThrottledUsec: 5000, NrBursts: 1, BurstUsec: 300}
	tests := []struct {
		name string
		cur  CPUStat
		want CPUStat
	}{
		{name: "nothing happened", cur: prev, want: CPUStat{}},
		{
			name: "every counter grew",
			cur:  CPUStat{UsageUsec: 150, UserUsec: 90, SystemUsec: 60, NrPeriods: 15, NrThrottled: 5, ThrottledUsec: 8000, NrBursts: 2, BurstUsec: 400},
			want: CPUStat{UsageUsec: 50, UserUsec: 30, SystemUsec: 20, NrPeriods: 5, NrThrottled: 3, ThrottledUsec: 3000, NrBursts: 1, BurstUsec: 100},
		},
		{
			name: "cgroup created again: counters restart",
			cur:  CPUStat{UsageUsec: 500, UserUsec: 300, SystemUsec: 200, NrPeriods: 3},
			want: CPUStat{UsageUsec: 500, UserUsec: 300, SystemUsec: 200, NrPeriods: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cur.Sub(prev); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestThrottledRatio(t *testing.T) {
	tests := []struct {
		name string
		st   CPUStat
		want float64
	}{
		{name: "no periods", st: CPUStat{}, want: 0},
		{name: "20 of 21", st: CPUStat{NrPeriods: 21, NrThrottled: 20}, want: 20.0 / 21},
		{name: "all", st: CPUStat{NrPeriods: 4, NrThrottled: 4}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.st.ThrottledRatio(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSampleSub(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	psi := func(some uint64, full *uint64) *Pressure {
		p := &Pressure{Some: PressureLine{Avg10Percent: 1.5, TotalUsec: some}}
		if full != nil {
			p.Full = &PressureLine{TotalUsec: *full}
		}
		return p
	}
	tests := []struct {
		name      string
		cur, prev Sample
		want      Sample
	}{
		{"counters grew",
			Sample{Group: "olap", CPU: CPUStat{UsageUsec: 300, NrPeriods: 5}, UsageKnown: true, LocalThrottledUsec: u(70), Pressure: psi(900, u(400))},
			Sample{Group: "olap", CPU: CPUStat{UsageUsec: 100, NrPeriods: 2}, UsageKnown: true, LocalThrottledUsec: u(20), Pressure: psi(500, u(100))},
			Sample{Group: "olap", CPU: CPUStat{UsageUsec: 200, NrPeriods: 3}, UsageKnown: true, LocalThrottledUsec: u(50), Pressure: psi(400, u(300))}},
		{"new group: from its creation",
			Sample{Group: "q1", CPU: CPUStat{UsageUsec: 300}, LocalThrottledUsec: u(70), Pressure: psi(900, nil)},
			Sample{},
			Sample{Group: "q1", CPU: CPUStat{UsageUsec: 300}, LocalThrottledUsec: u(70), Pressure: psi(900, nil)}},
		{"made anew in between: the new counts, local and pressure as they can",
			Sample{Group: "q1", CPU: CPUStat{UsageUsec: 30}, LocalThrottledUsec: u(5), Pressure: psi(10, u(4))},
			Sample{Group: "q1", CPU: CPUStat{UsageUsec: 300}, LocalThrottledUsec: u(70), Pressure: psi(900, u(400))},
			Sample{Group: "q1", CPU: CPUStat{UsageUsec: 30}, LocalThrottledUsec: u(5), Pressure: psi(0, u(0))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cur.Sub(tt.prev)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Sub =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestDeltas matches each group of a read with the same group of the read
// before, whatever the order, and counts a new group from its creation.
func TestDeltas(t *testing.T) {
	prev := []Sample{
		{Group: ".", CPU: CPUStat{UsageUsec: 1000, NrPeriods: 10}},
		{Group: "olap", CPU: CPUStat{UsageUsec: 400, NrPeriods: 4, NrThrottled: 1}},
		{Group: "gone", CPU: CPUStat{UsageUsec: 7}},
	}
	cur := []Sample{
		{Group: "olap", CPU: CPUStat{UsageUsec: 900, NrPeriods: 9, NrThrottled: 3}},
		{Group: ".", CPU: CPUStat{UsageUsec: 1500, NrPeriods: 12}},
		{Group: "olap/q-1", CPU: CPUStat{UsageUsec: 50, NrPeriods: 1}},
	}
	want := []Sample{
		{Group: "olap", CPU: CPUStat{UsageUsec: 500, NrPeriods: 5, NrThrottled: 2}},
		{Group: ".", CPU: CPUStat{UsageUsec: 500, NrPeriods: 2}},
		{Group: "olap/q-1", CPU: CPUStat{UsageUsec: 50, NrPeriods: 1}},
	}
	if got := Deltas(cur, prev); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
