package simulate

import (
	"errors"
	"fmt"
)

// TickLimit is a group's CPU bandwidth limit in ticks, the model of cgroup v2
// cpu.max ("QUOTA PERIOD") and cpu.max.burst: each Period ticks of wall time
// the group may use Quota CPU-ticks, plus up to Burst CPU-ticks it left
// unused in earlier periods.
type TickLimit struct {
	// Quota is the CPU-ticks granted at every period start; must be > 0.
	Quota int
	// Period is the length of a period in ticks; must be > 0.
	Period int
	// Burst is the most unused quota, in CPU-ticks, carried into the next
	// period (cpu.max.burst); 0 means leftovers vanish; must be >= 0.
	Burst int
}

// Task is a piece of work that appears at tick Arrive and is done after it
// has run Need ticks on one CPU. Tasks can be paused and resumed at any tick.
type Task struct {
	Name string
	// Arrive is the tick at which the task becomes runnable; must be >= 0.
	Arrive int
	// Need is the CPU-ticks the task uses before it is done; must be >= 0.
	Need int
}

// Result is what happened to one Task.
type Result struct {
	Name string
	// Arrive is the task's arrival tick.
	Arrive int
	// Done is the tick at which the task finished (the end of its last
	// running tick); for a task with Need 0, its arrival.
	Done int
	// Latency is Done - Arrive in ticks; anything above Need was waiting.
	Latency int
	// Throttled is the number of ticks in which the task was runnable and
	// not run because the group's quota was spent. Once the quota runs out
	// in a tick, every runnable task not yet served counts, even beyond
	// ncpu; a task that only waits while ncpu others run does not.
	Throttled int
}

// Period is the account of one period of the limit.
type Period struct {
	// Start is the period's first tick, a multiple of TickLimit.Period.
	Start int
	// Used is the CPU-ticks used in the period.
	Used int
	// Stalled is the wall-clock ticks of the period in which a runnable task
	// was throttled.
	Stalled int
	// Carried is the unused quota carried into this period, in CPU-ticks:
	// min(leftover of the previous period, TickLimit.Burst); 0 for the first.
	Carried int
	// Exhausted is the tick at which the quota ran out (the end of the tick
	// that spent the last CPU-tick), or -1 if it did not run out.
	Exhausted int
}

// ErrInvalidInput is wrapped by every error this package returns for input
// it cannot simulate, [Validate]'s and [RunChecked]'s among them; callers
// branch on it with errors.Is.
var ErrInvalidInput = errors.New("invalid simulation input")

// InputError names the input [Validate] rejected, its value and what would
// be accepted. It unwraps to [ErrInvalidInput].
type InputError struct {
	// Field is the rejected input, e.g. "TickLimit.Period", "ncpu" or
	// `tasks[3] "q1".Need`.
	Field string
	// Value is the rejected value.
	Value int
	// Want says what would be accepted, e.g. "> 0".
	Want string
}

// Error reads like "simulate: TickLimit.Period = 0: want > 0".
func (e *InputError) Error() string {
	return fmt.Sprintf("simulate: %s = %d: want %s", e.Field, e.Value, e.Want)
}

// Unwrap returns [ErrInvalidInput].
func (e *InputError) Unwrap() error { return ErrInvalidInput }

// Validate reports the first input [Run] cannot simulate as an
// [*InputError], or nil. It checks the TickLimit, then ncpu, then the tasks in
// slice order, then that the run ends within the int range of ticks.
func Validate(limit TickLimit, ncpu int, tasks []Task) error {
	switch {
	case limit.Quota <= 0:
		return &InputError{Field: "TickLimit.Quota", Value: limit.Quota, Want: "> 0 (a group with no quota never runs)"}
	case limit.Period <= 0:
		return &InputError{Field: "TickLimit.Period", Value: limit.Period, Want: "> 0"}
	case limit.Burst < 0:
		return &InputError{Field: "TickLimit.Burst", Value: limit.Burst, Want: ">= 0 (0 carries nothing over)"}
	case limit.Burst > maxInt-limit.Quota:
		return &InputError{Field: "TickLimit.Burst", Value: limit.Burst, Want: fmt.Sprintf("<= %d so that Quota+Burst fits in int", maxInt-limit.Quota)}
	case ncpu < 1:
		return &InputError{Field: "ncpu", Value: ncpu, Want: ">= 1"}
	}
	lastArrive, totalNeed := 0, 0
	for i, t := range tasks {
		switch {
		case t.Arrive < 0:
			return &InputError{Field: fmt.Sprintf("tasks[%d] %q.Arrive", i, t.Name), Value: t.Arrive, Want: ">= 0"}
		case t.Need < 0:
			return &InputError{Field: fmt.Sprintf("tasks[%d] %q.Need", i, t.Name), Value: t.Need, Want: ">= 0 (0 is done at arrival)"}
		case t.Need > maxInt-totalNeed:
			return &InputError{Field: fmt.Sprintf("tasks[%d] %q.Need", i, t.Name), Value: t.Need, Want: "a total Need over all tasks that fits in int"}
		}
		totalNeed += t.Need
		if t.Need > 0 {
			lastArrive = max(lastArrive, t.Arrive)
		}
	}
	if !endsInRange(limit, lastArrive, totalNeed) {
		return &InputError{Field: "total Need", Value: totalNeed,
			Want: fmt.Sprintf("a total that, with the last arrival at tick %d and Period %d, ends the run before tick %d", lastArrive, limit.Period, maxInt)}
	}
	return nil
}

const maxInt = int(^uint(0) >> 1)

// endsInRange reports whether the end of the last period of a run fits in
// int. From the first period start after the last arrival (at most
// lastArrive+Period-1), every period with work left runs at least
// min(Quota, Period) CPU-ticks, so the run ends by that start plus
// ceil(totalNeed/min(Quota, Period)) periods, and its last period ends at
// most one Period later.
func endsInRange(limit TickLimit, lastArrive, totalNeed int) bool {
	periods := totalNeed/min(limit.Quota, limit.Period) + 3
	return periods <= (maxInt-lastArrive)/limit.Period
}

// Run simulates tasks under limit on ncpu CPUs with the chapter's
// semantics to the tick (see the package documentation) and returns one
// Result per task in slice order and one Period per period from tick 0
// until the last task is done. On input [Validate] rejects it returns
// nil, nil; use [RunChecked] to learn why. Run never panics and always
// ends. It jumps from event to event (arrivals, completions, quota
// exhaustion, period starts), so its cost grows with the number of tasks
// and periods, not with the simulated time.
func Run(limit TickLimit, ncpu int, tasks []Task) ([]Result, []Period) {
	res, periods, err := RunChecked(limit, ncpu, tasks)
	if err != nil {
		return nil, nil
	}
	return res, periods
}

// RunChecked is [Run] that returns the [*InputError] of [Validate] instead
// of nil results on input it cannot simulate.
func RunChecked(limit TickLimit, ncpu int, tasks []Task) ([]Result, []Period, error) {
	if err := Validate(limit, ncpu, tasks); err != nil {
		return nil, nil, err
	}
	res, periods := runEvents(limit, ncpu, tasks)
	return res, periods, nil
}
