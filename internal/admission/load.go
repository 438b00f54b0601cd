package admission

import (
	"fmt"
	"time"
)

// YDB's defaults for CPU-load admission.
const (
	// DefaultSampleInterval is how often the host load is sampled.
	DefaultSampleInterval = time.Second
	// DefaultRefreshInterval is how often the moving average is taken
	// over and the reservations are dropped.
	DefaultRefreshInterval = 10 * time.Second
	// DefaultReservePercent is the host CPU each admitted query reserves
	// until the next refresh, percent.
	DefaultReservePercent = 10.0
)

// LoadConfig tunes CPU-load admission.
type LoadConfig struct {
	// RefreshInterval is the time between refreshes: at a refresh the load
	// becomes the mean of the samples of the last RefreshInterval and every
	// reservation is dropped. 0 means DefaultRefreshInterval.
	RefreshInterval time.Duration
	// ReservePercent is what each query admitted in a pool with a CPU
	// threshold adds to the load until the next refresh, percent of the
	// host. 0 means DefaultReservePercent.
	ReservePercent float64
}

func (c LoadConfig) withDefaults() LoadConfig {
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.ReservePercent == 0 {
		c.ReservePercent = DefaultReservePercent
	}
	return c
}

func (c LoadConfig) validate() error {
	if c.RefreshInterval < 0 {
		return fmt.Errorf("load refresh interval %s: want a positive duration", c.RefreshInterval)
	}
	if c.ReservePercent < 0 || c.ReservePercent > 100 {
		return fmt.Errorf("reservation %g%%: want 0..100 percent of the host", c.ReservePercent)
	}
	return nil
}

type loadSample struct {
	at          time.Time
	busyPercent float64
}

// LoadWindow is the state of CPU-load admission where the load is
// measured (YDB's DATABASE_LOAD_CPU_THRESHOLD): the samples of the current
// refresh interval, the moving average taken at the last refresh and the
// reservations made since. The single-host Controller and a fleet node
// each keep one.
type LoadWindow struct {
	cfg LoadConfig
	// samples of the current window, oldest first.
	samples []loadSample
	// averagePercent is the moving average taken at the last refresh; 0
	// until the first sample.
	averagePercent float64
	// reservedPercent is the sum of reservations since the last refresh.
	reservedPercent float64
	lastRefresh     time.Time
	refreshed       bool
}

// NewLoadWindow returns an empty window for cfg, its zero fields taking
// the defaults.
func NewLoadWindow(cfg LoadConfig) (LoadWindow, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return LoadWindow{}, err
	}
	return LoadWindow{cfg: cfg}, nil
}

// Add records a sample and refreshes when the first sample arrives or
// RefreshInterval has passed since the last refresh: the average becomes
// the mean of the window's samples and the reservations are dropped. It
// reports whether it refreshed.
func (w *LoadWindow) Add(now time.Time, busyPercent float64) bool {
	w.samples = append(w.samples, loadSample{at: now, busyPercent: busyPercent})
	cutoff := now.Add(-w.cfg.RefreshInterval)
	drop := 0
	for drop < len(w.samples) && !w.samples[drop].at.After(cutoff) {
		drop++
	}
	w.samples = append(w.samples[:0], w.samples[drop:]...)
	if w.refreshed && now.Sub(w.lastRefresh) < w.cfg.RefreshInterval {
		return false
	}
	sum := 0.0
	for _, s := range w.samples {
		sum += s.busyPercent
	}
	w.averagePercent = sum / float64(len(w.samples))
	w.reservedPercent = 0
	w.lastRefresh = now
	w.refreshed = true
	return true
}

// Admits reports whether a query may start under threshold percent: the
// average and the reservations together below it.
func (w *LoadWindow) Admits(thresholdPercent float64) bool {
	return w.averagePercent+w.reservedPercent < thresholdPercent
}

// Reserve adds one admitted query's reservation until the next refresh;
// Unreserve takes one back.
func (w *LoadWindow) Reserve()   { w.reservedPercent += w.cfg.ReservePercent }
func (w *LoadWindow) Unreserve() { w.reservedPercent -= w.cfg.ReservePercent }

// Stats are the window's average and reservations, percent, and when it
// last refreshed.
func (w *LoadWindow) Stats() LoadStats {
	return LoadStats{AveragePercent: w.averagePercent, ReservedPercent: w.reservedPercent, LastRefresh: w.lastRefresh}
}
