package fleet

import (
	"context"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// clusterLoadPercent is the cluster's load: the mean over the live nodes'
// records of their measured load (this node's until a record is known).
// np.mu and the cluster's lock are held.
func (np *pipeline) clusterLoadPercent() float64 {
	return np.cluster.loadPercent(np.load.Stats().AveragePercent)
}

// loadAdmits is DATABASE_LOAD_CPU_THRESHOLD across the cluster: the
// cluster's load plus this node's reservations below threshold percent.
// np.mu and the cluster's lock are held.
func (np *pipeline) loadAdmits(thresholdPercent float64) bool {
	return np.clusterLoadPercent()+np.load.Stats().ReservedPercent < thresholdPercent
}

// Sample records this node's CPU load, percent busy over the last sample
// interval. At a refresh (the first sample, then every RefreshInterval) the
// node's moving average goes to its node record (in the background), its
// reservations are dropped and queued queries start as far as the
// thresholds allow (their events are sent on Events). It reports whether
// it refreshed.
func (b *Backend) Sample(now time.Time, busyPercent float64) ([]admission.Event, bool) {
	b.mu.Lock()
	refreshed := b.load.Add(now, busyPercent)
	b.publish = b.publish || refreshed
	b.mu.Unlock()
	if refreshed {
		b.poke()
	}
	return nil, refreshed
}

// publishRecord puts the node record after a refresh changed it (the
// pump set b.publishing); a failed put is tried again at a later pump.
func (b *Backend) publishRecord() {
	lease := b.session.id()
	var err error
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
		start := time.Now()
		err = b.putRecord(ctx, lease)
		cancel()
		b.session.note(start, err)
	}
	b.mu.Lock()
	b.publishing = false
	b.publish = b.publish || lease == 0 || err != nil
	b.mu.Unlock()
}

// Load returns the state of CPU-load admission on this node: the
// cluster's load (mean of the live nodes' measured loads) and this node's
// reservations.
func (b *Backend) Load() admission.LoadStats {
	b.lock()
	defer b.unlock()
	st := b.load.Stats()
	st.AveragePercent = b.clusterLoadPercent()
	return st
}
