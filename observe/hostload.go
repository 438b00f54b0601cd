package observe

import (
	"errors"
	"fmt"

	"github.com/prometheus/procfs"
)

// ErrNoElapsed is returned by LoadSampler.Sample when no CPU time has
// passed since the previous sample (/proc/stat counts in USER_HZ ticks,
// 10 ms), so no busy fraction can be computed yet.
var ErrNoElapsed = errors.New("no CPU time elapsed since the previous sample")

// HostCPU is the host's CPU time since boot, summed over all CPUs, in
// seconds, from the "cpu" line of /proc/stat:
//
//	cpu  user nice system idle iowait irq softirq steal guest guest_nice
//
// Busy is user+nice+system+irq+softirq+steal; Total adds idle and iowait.
// guest and guest_nice are already counted in user and nice and are left
// out.
type HostCPU struct {
	BusySeconds  float64
	TotalSeconds float64
}

// ReadHostCPU reads /proc/stat from the proc filesystem fs, e.g.
// procfs.NewFS("/proc").
func ReadHostCPU(fs procfs.FS) (HostCPU, error) {
	st, err := fs.Stat()
	if err != nil {
		return HostCPU{}, fmt.Errorf("read host CPU time: %w", err)
	}
	c := st.CPUTotal
	busy := c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return HostCPU{BusySeconds: busy, TotalSeconds: busy + c.Idle + c.Iowait}, nil
}

// BusyFraction returns the share of CPU time that was busy between prev
// and h, from 0 (idle) to 1 (every CPU busy). It returns ErrNoElapsed when
// h is not later than prev.
//
// NOTE: iowait can step backwards on Linux (it is sampled per CPU while
// tasks sleep on I/O), so the busy share is clamped to 0..1.
func (h HostCPU) BusyFraction(prev HostCPU) (float64, error) {
	total := h.TotalSeconds - prev.TotalSeconds
	if total <= 0 {
		return 0, ErrNoElapsed
	}
	f := (h.BusySeconds - prev.BusySeconds) / total
	return min(max(f, 0), 1), nil
}

// LoadSampler measures the host's CPU load between successive samples of
// /proc/stat. It is not safe for concurrent use.
type LoadSampler struct {
	fs   procfs.FS
	prev HostCPU
}

// NewLoadSampler opens the proc filesystem mounted at procRoot (normally
// "/proc") and takes the first sample.
func NewLoadSampler(procRoot string) (*LoadSampler, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("open proc filesystem %s: %w", procRoot, err)
	}
	prev, err := ReadHostCPU(fs)
	if err != nil {
		return nil, err
	}
	return &LoadSampler{fs: fs, prev: prev}, nil
}

// Sample returns the host's busy fraction (0..1) since the previous sample
// (or since NewLoadSampler) and makes this sample the new reference. On
// ErrNoElapsed the reference is kept, so the next call covers the whole
// time since the last successful one.
func (s *LoadSampler) Sample() (float64, error) {
	cur, err := ReadHostCPU(s.fs)
	if err != nil {
		return 0, err
	}
	f, err := cur.BusyFraction(s.prev)
	if err != nil {
		return 0, err
	}
	s.prev = cur
	return f, nil
}
