package simulate

import (
	"cmp"
	"slices"
)

// runEvents computes what the chapter's tick-by-tick loop computes, but
// jumps from event to event: period starts, arrivals, completions, the tick
// the quota runs out, and the one tick in which it runs out part-way. Its
// cost grows with the number of tasks and periods, not with the number of
// ticks: O((tasks+periods) * min(ncpu, tasks) + tasks*log(tasks)) time and
// O(tasks + periods) memory.
//
// Within a period the runnable tasks R (arrived, not done, in slice order)
// split into the first m = min(ncpu, |R|), which get a CPU, and the rest,
// which wait for one. With r quota left:
//   - r >= m: the first m run together until the next event; nothing is
//     throttled.
//   - 0 < r < m: for one tick the first r run, spending the quota, and every
//     other task of R is throttled, however many there are.
//   - r == 0: every task of R is throttled until the period ends or a task
//     arrives.
//
// Throttled ticks are counted lazily so that throttling all of R costs
// O(1): allThrottled counts the ticks in which every runnable task was
// throttled, each task remembers its value on arrival, and a task that ran
// in a partial tick has that tick taken back.
func runEvents(limit TickLimit, ncpu int, tasks []Task) ([]Result, []Period) {
	r := newEventRun(limit, ncpu, tasks)
	for r.active > 0 {
		r.startPeriod()
		r.runPeriod()
	}
	return r.res, r.periods
}

// eventRun is runEvents' state between periods; quantities in ticks.
type eventRun struct {
	limit TickLimit
	tasks []Task
	res   []Result
	left  []int // work left, by task
	// While task i is runnable, throttled[i] + allThrottled is the ticks
	// it has been throttled so far.
	throttled    []int
	allThrottled int
	arrivals     []int // tasks with work, by arrival tick, then slice order
	next         int   // arrivals[next] is the next task to arrive
	active       int   // tasks with work left, arrived or not
	q            runQueue
	periods      []Period
	remaining    int // quota left in the current period
	t            int // now
}

// newEventRun starts a run of tasks: a task that needs nothing is done at
// its arrival and takes no part in it.
func newEventRun(limit TickLimit, ncpu int, tasks []Task) *eventRun {
	r := &eventRun{
		limit:     limit,
		tasks:     tasks,
		res:       make([]Result, len(tasks)),
		left:      make([]int, len(tasks)),
		throttled: make([]int, len(tasks)),
		arrivals:  make([]int, 0, len(tasks)),
		q:         runQueue{ncpu: ncpu},
	}
	for i, t := range tasks {
		r.res[i] = Result{Name: t.Name, Arrive: t.Arrive, Done: -1}
		r.left[i] = t.Need
		if t.Need == 0 {
			r.res[i].Done = t.Arrive
			continue
		}
		r.arrivals = append(r.arrivals, i)
	}
	slices.SortStableFunc(r.arrivals, func(a, b int) int { return cmp.Compare(tasks[a].Arrive, tasks[b].Arrive) })
	r.active = len(r.arrivals)
	return r
}

// startPeriod opens a period at r.t with the quota and, after the first
// period, the burst carried from the last one.
func (r *eventRun) startPeriod() {
	carry := 0
	if len(r.periods) > 0 {
		carry = min(r.remaining, r.limit.Burst)
	}
	r.remaining = r.limit.Quota + carry
	r.periods = append(r.periods, Period{Start: r.t, Carried: carry, Exhausted: -1})
}

// runPeriod jumps from event to event until the period ends or no task
// has work left, by the three cases of runEvents' comment. The state it
// changes at every event is kept in locals while it runs, which keeps
// the engine's cost per event low.
func (r *eventRun) runPeriod() {
	p := &r.periods[len(r.periods)-1]
	t, remaining, allThrottled, next := r.t, r.remaining, r.allThrottled, r.next
	end := t + r.limit.Period
	done := func(i int) {
		r.res[i].Done = t
		r.res[i].Latency = t - r.tasks[i].Arrive
		r.res[i].Throttled = r.throttled[i] + allThrottled
	}
	for t < end && r.active > 0 {
		for next < len(r.arrivals) && r.tasks[r.arrivals[next]].Arrive <= t {
			i := r.arrivals[next]
			r.throttled[i] = -allThrottled
			r.q.add(i)
			next++
		}
		until := end // the next period start or arrival
		if next < len(r.arrivals) {
			until = min(until, r.tasks[r.arrivals[next]].Arrive)
		}
		m := len(r.q.running)
		switch {
		case m == 0: // idle
			t = until
			continue
		case remaining == 0:
			allThrottled += until - t
			p.Stalled += until - t
			t = until
			continue
		case remaining < m:
			allThrottled++
			p.Stalled++
			for _, i := range r.q.running[:remaining] {
				r.throttled[i]-- // it ran in this tick
				r.left[i]--
			}
			p.Used += remaining
			remaining = 0
			p.Exhausted = t + 1
			t++
		default:
			d := min(until-t, remaining/m)
			for _, i := range r.q.running {
				d = min(d, r.left[i])
			}
			for _, i := range r.q.running {
				r.left[i] -= d
			}
			p.Used += d * m
			remaining -= d * m
			t += d
			if remaining == 0 {
				p.Exhausted = t
			}
		}
		r.active -= r.q.finish(r.left, done)
	}
	r.t, r.remaining, r.allThrottled, r.next = t, remaining, allThrottled, next
}

// runQueue holds the runnable tasks by slice index: running is the first
// min(ncpu, runnable) of them in ascending order, waiting the rest.
type runQueue struct {
	ncpu    int
	running []int
	waiting minHeap
}

// add makes task i runnable.
func (q *runQueue) add(i int) {
	if len(q.running) == q.ncpu {
		last := q.running[len(q.running)-1]
		if i > last {
			q.waiting.push(i)
			return
		}
		q.running = q.running[:len(q.running)-1]
		q.waiting.push(last)
	}
	at, _ := slices.BinarySearch(q.running, i)
	q.running = slices.Insert(q.running, at, i)
}

// finish removes the running tasks with nothing left, calling done for
// each, hands their CPUs to the first waiting tasks and returns how many
// finished.
func (q *runQueue) finish(left []int, done func(i int)) int {
	n := 0
	q.running = slices.DeleteFunc(q.running, func(i int) bool {
		if left[i] > 0 {
			return false
		}
		done(i)
		n++
		return true
	})
	for len(q.running) < q.ncpu && len(q.waiting) > 0 {
		q.running = append(q.running, q.waiting.pop())
	}
	return n
}

// minHeap is a binary heap of task indices, smallest first. It is written
// out rather than used through container/heap so that pushing an index does
// not allocate.
type minHeap []int

// push adds task index i.
func (h *minHeap) push(i int) {
	*h = append(*h, i)
	a := *h
	for c := len(a) - 1; c > 0; {
		parent := (c - 1) / 2
		if a[parent] <= a[c] {
			break
		}
		a[parent], a[c] = a[c], a[parent]
		c = parent
	}
}

// pop removes and returns the smallest index; h must not be empty.
func (h *minHeap) pop() int {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for p := 0; ; {
		c := 2*p + 1
		if c >= len(a) {
			break
		}
		if c+1 < len(a) && a[c+1] < a[c] {
			c++
		}
		if a[p] <= a[c] {
			break
		}
		a[p], a[c] = a[c], a[p]
		p = c
	}
	*h = a
	return top
}
