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

// hostLoad is the host-wide state of CPU-load admission.
type hostLoad struct {
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

// add records a sample and refreshes when the first sample arrives or
// RefreshInterval has passed since the last refresh. It reports whether it
// refreshed.
func (h *hostLoad) add(now time.Time, busyPercent float64) bool {
	h.samples = append(h.samples, loadSample{at: now, busyPercent: busyPercent})
	cutoff := now.Add(-h.cfg.RefreshInterval)
	drop := 0
	for drop < len(h.samples) && !h.samples[drop].at.After(cutoff) {
		drop++
	}
	h.samples = append(h.samples[:0], h.samples[drop:]...)
	if h.refreshed && now.Sub(h.lastRefresh) < h.cfg.RefreshInterval {
		return false
	}
	sum := 0.0
	for _, s := range h.samples {
		sum += s.busyPercent
	}
	h.averagePercent = sum / float64(len(h.samples))
	h.reservedPercent = 0
	h.lastRefresh = now
	h.refreshed = true
	return true
}

// admits reports whether a query may start under threshold percent.
func (h *hostLoad) admits(thresholdPercent float64) bool {
	return h.averagePercent+h.reservedPercent < thresholdPercent
}

func (h *hostLoad) reserve() { h.reservedPercent += h.cfg.ReservePercent }
