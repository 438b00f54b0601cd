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
	res := make([]Result, len(tasks))
	left := make([]int, len(tasks))
	// While task i is runnable, throttled[i] + allThrottled is the ticks
	// it has been throttled so far.
	throttled := make([]int, len(tasks))
	arrivals := make([]int, 0, len(tasks)) // tasks with work, by arrival tick, then slice order
	for i, t := range tasks {
		res[i] = Result{Name: t.Name, Arrive: t.Arrive, Done: -1}
		left[i] = t.Need
		if t.Need == 0 {
			res[i].Done = t.Arrive
			continue
		}
		arrivals = append(arrivals, i)
	}
	slices.SortStableFunc(arrivals, func(a, b int) int { return cmp.Compare(tasks[a].Arrive, tasks[b].Arrive) })

	q := runQueue{ncpu: ncpu}
	var periods []Period
	allThrottled := 0
	remaining := 0
	active := len(arrivals)
	next := 0 // arrivals[next] is the next task to arrive
	t := 0
	for active > 0 {
		carry := 0
		if len(periods) > 0 {
			carry = min(remaining, limit.Burst)
		}
		remaining = limit.Quota + carry
		periods = append(periods, Period{Start: t, Carried: carry, Exhausted: -1})
		p := &periods[len(periods)-1]
		end := t + limit.Period

		for t < end && active > 0 {
			for next < len(arrivals) && tasks[arrivals[next]].Arrive <= t {
				i := arrivals[next]
				throttled[i] = -allThrottled
				q.add(i)
				next++
			}
			until := end // the next period start or arrival
			if next < len(arrivals) {
				until = min(until, tasks[arrivals[next]].Arrive)
			}
			m := len(q.running)
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
				for _, i := range q.running[:remaining] {
					throttled[i]-- // it ran in this tick
					left[i]--
				}
				p.Used += remaining
				remaining = 0
				p.Exhausted = t + 1
				t++
			default:
				d := min(until-t, remaining/m)
				for _, i := range q.running {
					d = min(d, left[i])
				}
				for _, i := range q.running {
					left[i] -= d
				}
				p.Used += d * m
				remaining -= d * m
				t += d
				if remaining == 0 {
					p.Exhausted = t
				}
			}
			active -= q.finish(left, func(i int) {
				res[i].Done = t
				res[i].Latency = t - tasks[i].Arrive
				res[i].Throttled = throttled[i] + allThrottled
			})
		}
	}
	return res, periods
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
