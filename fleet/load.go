package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/poolagent/poolagent/admission"
)

// nodeLoad is this node's part of CPU-load admission: its own samples and
// moving average (published in its node record) and its own reservations.
type nodeLoad struct {
	cfg             admission.LoadConfig
	samples         []loadSample
	averagePercent  float64
	reservedPercent float64
	lastRefresh     time.Time
	refreshed       bool
}

type loadSample struct {
	at          time.Time
	busyPercent float64
}

func newNodeLoad(cfg admission.LoadConfig) (nodeLoad, error) {
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = admission.DefaultRefreshInterval
	}
	if cfg.ReservePercent == 0 {
		cfg.ReservePercent = admission.DefaultReservePercent
	}
	if cfg.RefreshInterval < 0 {
		return nodeLoad{}, fmt.Errorf("load refresh interval %s: want a positive duration", cfg.RefreshInterval)
	}
	if cfg.ReservePercent < 0 || cfg.ReservePercent > 100 {
		return nodeLoad{}, fmt.Errorf("reservation %g%%: want 0..100 percent of the node", cfg.ReservePercent)
	}
	return nodeLoad{cfg: cfg}, nil
}

// add records a sample and reports whether it refreshed: the first sample,
// then one each RefreshInterval. A refresh takes the mean of the window's
// samples and drops the reservations.
func (n *nodeLoad) add(now time.Time, busyPercent float64) bool {
	n.samples = append(n.samples, loadSample{at: now, busyPercent: busyPercent})
	cutoff := now.Add(-n.cfg.RefreshInterval)
	drop := 0
	for drop < len(n.samples) && !n.samples[drop].at.After(cutoff) {
		drop++
	}
	n.samples = append(n.samples[:0], n.samples[drop:]...)
	if n.refreshed && now.Sub(n.lastRefresh) < n.cfg.RefreshInterval {
		return false
	}
	sum := 0.0
	for _, s := range n.samples {
		sum += s.busyPercent
	}
	n.averagePercent = sum / float64(len(n.samples))
	n.reservedPercent = 0
	n.lastRefresh = now
	n.refreshed = true
	return true
}

func (n *nodeLoad) reserve()   { n.reservedPercent += n.cfg.ReservePercent }
func (n *nodeLoad) unreserve() { n.reservedPercent -= n.cfg.ReservePercent }

// clusterLoadPercent is the cluster's load: the mean over the live nodes'
// records of their measured load. b.mu is held.
func (b *Backend) clusterLoadPercent() float64 {
	if len(b.nodes) == 0 {
		return b.load.averagePercent
	}
	sum := 0.0
	for _, n := range b.nodes {
		sum += n.LoadPercent
	}
	return sum / float64(len(b.nodes))
}

// loadAdmits is DATABASE_LOAD_CPU_THRESHOLD across the cluster: the
// cluster's load plus this node's reservations below threshold percent.
// b.mu is held.
func (b *Backend) loadAdmits(thresholdPercent float64) bool {
	return b.clusterLoadPercent()+b.load.reservedPercent < thresholdPercent
}

// Sample records this node's CPU load, percent busy over the last sample
// interval. At a refresh (the first sample, then every RefreshInterval) the
// node's moving average goes to its node record (in the background), its
// reservations are dropped and queued queries start as far as the
// thresholds allow (their events are sent on Events). It reports whether
// it refreshed.
func (b *Backend) Sample(now time.Time, busyPercent float64) ([]admission.Event, bool) {
	b.mu.Lock()
	refreshed := b.load.add(now, busyPercent)
	b.publish = b.publish || refreshed
	b.mu.Unlock()
	if refreshed {
		b.poke()
	}
	return nil, refreshed
}

// publishRecord puts the node record when a refresh changed it.
func (b *Backend) publishRecord() {
	b.mu.Lock()
	lease, publish := b.lease, b.publish
	b.publish = false
	b.mu.Unlock()
	if !publish || lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	start := time.Now()
	err := b.putRecord(ctx, lease)
	cancel()
	b.note(start, err)
	if err != nil {
		b.mu.Lock()
		b.publish = true
		b.mu.Unlock()
	}
}

// Load returns the state of CPU-load admission on this node: the
// cluster's load (mean of the live nodes' measured loads) and this node's
// reservations.
func (b *Backend) Load() admission.LoadStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return admission.LoadStats{
		AveragePercent:  b.clusterLoadPercent(),
		ReservedPercent: b.load.reservedPercent,
		LastRefresh:     b.load.lastRefresh,
	}
}
