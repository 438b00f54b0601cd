// Package accuracy names the classes of workload the kernel-faithful
// model is measured on (docs/accuracy.md) and holds the model's measured
// error for each, as the accuracy run found it: `poolagent compare` files
// every measured group under a class, and `poolagent advise` widens its
// margin by the error of the class a recorded pool falls into.
package accuracy

// Class is a kind of workload whose throttling the model predicts with
// its own accuracy: what decides how close the prediction comes is how
// many runqueues the work is on at once, who chose them, and whether
// another pool competes for the same CPU.
type Class string

// The classes, from the most predictable to the least.
const (
	// OneCPU is work on one CPU at a time: one thread, or every task
	// pinned to the same CPU, with no other pool running on that CPU.
	OneCPU Class = "one CPU"
	// PinnedSpread is work pinned to several CPUs, one runqueue per
	// CPU, each throttled on its own.
	PinnedSpread Class = "pinned, several CPUs"
	// PlacedBelowCPU is parallel threads placed by the kernel's wake-up
	// placement and load balancing, under a quota below one CPU.
	PlacedBelowCPU Class = "placed by the kernel, quota below one CPU"
	// PlacedCPUOrMore is parallel threads placed by the kernel under a
	// quota of one CPU or more.
	PlacedCPUOrMore Class = "placed by the kernel, quota of one CPU or more"
	// QuotaEdge is work that ends as the quota runs out: it needs a whole
	// number of quotas, so whether its last period ends with one more
	// throttle turns on a few µs.
	QuotaEdge Class = "work ending as the quota runs out"
	// SharedCPU is work on one CPU that another pool runs on at the same
	// time: the two take turns on the CPU.
	SharedCPU Class = "one CPU, shared with another pool"
)

// Classes lists every class in the order above.
var Classes = []Class{OneCPU, PinnedSpread, PlacedBelowCPU, PlacedCPUOrMore, QuotaEdge, SharedCPU}

// Work describes a group's work for [Classify].
type Work struct {
	// Threads is the most threads the group runs at once.
	Threads int
	// PinnedCPUs is the number of distinct CPUs the group's tasks are
	// pinned to; 0 when any of them may run anywhere.
	PinnedCPUs int
	// QuotaCPUs is the group's quota in CPUs (quota/period); negative
	// without a quota.
	QuotaCPUs float64
	// SharesCPU is set when another pool's pinned work runs on the same
	// CPU at the same time.
	SharesCPU bool
	// WholeQuotas is set when the group's work adds up to a whole number
	// of its quotas, within a scheduler tick per CPU it runs on.
	WholeQuotas bool
}

// Classify returns the class of w: work on a CPU shared with another
// pool, then work of a whole number of quotas, then pinned work by its
// CPUs and unpinned work by its threads: one thread is on one CPU at a
// time, several are placed by the kernel and split by whether the quota
// reaches one CPU.
func Classify(w Work) Class {
	switch {
	case w.PinnedCPUs == 1 && w.SharesCPU:
		return SharedCPU
	case w.WholeQuotas:
		return QuotaEdge
	case w.PinnedCPUs == 1:
		return OneCPU
	case w.PinnedCPUs > 1:
		return PinnedSpread
	case w.Threads <= 1:
		return OneCPU
	case w.QuotaCPUs >= 0 && w.QuotaCPUs < 1:
		return PlacedBelowCPU
	}
	return PlacedCPUOrMore
}
