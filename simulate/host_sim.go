package simulate

import (
	"github.com/poolagent/poolagent/observe"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// strideScale is the virtual time one CPU-tick costs a group of weight 1;
// a group of weight w pays strideScale/w. It is divisible by every weight
// from 1 to 16, by 10000 and by the round weights operators use (100, 300,
// 700, ...), so those shares come out exact.
const strideScale int64 = 720720 * 10000

// notExhausted is an exhaustion index beyond any CPU count: the quota did
// not run out in this tick.
const notExhausted = maxInt

// hostGroup is a group's state during RunHost; quantities in ticks.
type hostGroup struct {
	parent   int   // index into hostSim.groups, -1 under the node
	children []int // indices, in Host.Groups order
	tasks    []int // indices into hostSim.tasks, in Host.Tasks order
	limited  bool
	quota    int
	period   int
	burst    int
	stride   int64

	remaining int   // quota left in the current period
	vtime     int64 // virtual time among its siblings
	periods   []Period
	usage     int // CPU-ticks over the run
	trace     []GroupTick

	// Per tick.
	cap         int  // most CPUs the group can take: demand within quotas and CPU sets
	ncpus       int  // CPUs in its CPU set, 0 = every CPU
	given       int  // CPUs it took
	exhaustedAt int  // CPUs handed out on the node when its quota ran out, or notExhausted
	unserved    bool // a thread of it or a descendant wanted to run and did not
	throttled   bool // unserved because its own quota ran out while a CPU was free
	held        bool // not throttled, but a thread under it was held by another group's quota
	waiting     bool // a thread under it wanted to run, had quota and got no CPU
}

// hostTask is a task's state during RunHost; quantities in ticks.
type hostTask struct {
	group   int
	arrive  int
	left    int
	threads int
	res     Result
	want    int // per tick: CPUs it wants
	got     int // per tick: CPUs it got
}

// hostSim steps the simple host model one tick at a time.
type hostSim struct {
	host    Host
	cpus    int
	tick    int64
	groups  []hostGroup
	roots   []int // groups directly under the node
	tasks   []hostTask
	pending int // tasks with work left
	trace   int // ticks to trace
	now     int
}

func newHostSim(h Host, opt HostOptions) *hostSim {
	s := &hostSim{host: h, cpus: h.CPUs, tick: h.TickUsec, trace: opt.TraceTicks}
	index := make(map[string]int, len(h.Groups))
	s.groups = make([]hostGroup, len(h.Groups))
	for i, g := range h.Groups {
		index[g.Name] = i
		hg := hostGroup{
			parent:  -1,
			limited: g.QuotaUsec != cpulimit.Max,
			quota:   int(g.QuotaUsec / h.TickUsec),
			period:  int(g.PeriodUsec / h.TickUsec),
			burst:   int(g.BurstUsec / h.TickUsec),
			stride:  int64(float64(strideScale) / g.SchedWeight()),
			ncpus:   g.CPUs.Count(),
		}
		if g.Parent != "" {
			hg.parent = index[g.Parent]
			s.groups[hg.parent].children = append(s.groups[hg.parent].children, i)
		} else {
			s.roots = append(s.roots, i)
		}
		s.groups[i] = hg
	}
	s.tasks = make([]hostTask, len(h.Tasks))
	for i, t := range h.Tasks {
		ht := hostTask{
			group:   index[t.Group],
			arrive:  int(t.ArriveUsec / h.TickUsec),
			left:    int(t.NeedUsec / h.TickUsec),
			threads: max(t.Threads, 1),
		}
		ht.res = Result{Name: t.Name, Arrive: ht.arrive, Done: -1}
		if ht.left == 0 {
			ht.res.Done = ht.arrive
		} else {
			s.pending++
		}
		s.groups[ht.group].tasks = append(s.groups[ht.group].tasks, i)
		s.tasks[i] = ht
	}
	return s
}

// run steps until every task is done. Ticks in which no task is runnable
// are skipped, but every period start on the way is still reported.
func (s *hostSim) run() {
	for s.pending > 0 {
		s.startPeriods()
		if !s.demand() {
			s.now = s.nextEvent()
			continue
		}
		s.step()
		s.now++
	}
}

// startPeriods refills the quota of every group whose period starts now,
// carrying min(leftover, burst) over as the chapter does.
func (s *hostSim) startPeriods() {
	for i := range s.groups {
		g := &s.groups[i]
		if s.now%g.period != 0 {
			continue
		}
		carry := 0
		if g.limited {
			if len(g.periods) > 0 {
				carry = min(g.remaining, g.burst)
			}
			g.remaining = g.quota + carry
		}
		g.periods = append(g.periods, Period{Start: s.now, Carried: carry, Exhausted: -1})
	}
}

// demand sets what every task wants this tick and reports whether any
// task is runnable.
func (s *hostSim) demand() bool {
	runnable := false
	for i := range s.tasks {
		t := &s.tasks[i]
		t.want, t.got = 0, 0
		if t.left > 0 && t.arrive <= s.now {
			t.want = min(t.threads, t.left)
			runnable = true
		}
	}
	return runnable
}

// nextEvent is the next tick after now at which a task arrives or a
// period starts; called when nothing is runnable and work is pending.
func (s *hostSim) nextEvent() int {
	next := maxInt
	for _, t := range s.tasks {
		if t.left > 0 && t.arrive > s.now {
			next = min(next, t.arrive)
		}
	}
	for _, g := range s.groups {
		next = min(next, (s.now/g.period+1)*g.period)
	}
	return next
}

// step simulates tick s.now: it hands the CPUs out one by one, then
// charges, throttles and finishes tasks.
func (s *hostSim) step() {
	s.setCaps()
	s.handOut()
	s.markUnserved()
	s.countTick()
	s.finishTasks()
	if s.now < s.trace {
		s.record()
	}
	s.settle(s.roots)
	for i := range s.groups {
		s.settle(s.groups[i].children)
	}
}

// setCaps clears each group's per-tick state and sets its cap: its
// tasks' and children's demand within its quota left and its CPU set.
// It goes bottom-up: children come after their parents in s.groups.
func (s *hostSim) setCaps() {
	for i := len(s.groups) - 1; i >= 0; i-- {
		g := &s.groups[i]
		c := 0
		for _, t := range g.tasks {
			c += s.tasks[t].want
		}
		for _, ch := range g.children {
			c += s.groups[ch].cap
		}
		g.given, g.exhaustedAt = 0, notExhausted
		g.unserved, g.throttled, g.held, g.waiting = false, false, false, false
		if g.limited {
			c = min(c, g.remaining)
			if g.remaining == 0 {
				g.exhaustedAt = 0
			}
		}
		if g.ncpus > 0 {
			c = min(c, g.ncpus)
		}
		g.cap = c
	}
}

// handOut gives the CPUs out one at a time: each goes down the tree to
// the sibling with the smallest virtual time and room left, charging
// every group on the way, and runs a thread of the first task there that
// wants more.
func (s *hostSim) handOut() {
	for ran := 0; ran < s.cpus; ran++ {
		g := s.pick(s.roots)
		if g < 0 {
			return
		}
		for {
			s.charge(g, ran)
			next := s.pick(s.groups[g].children)
			if next < 0 {
				break
			}
			g = next
		}
		for _, t := range s.groups[g].tasks {
			if task := &s.tasks[t]; task.got < task.want {
				task.got++
				break
			}
		}
	}
}

// markUnserved marks every group above a task that got fewer CPUs than it
// wanted.
func (s *hostSim) markUnserved() {
	for i := range s.tasks {
		t := &s.tasks[i]
		if t.got < t.want {
			for g := t.group; g >= 0 && !s.groups[g].unserved; g = s.groups[g].parent {
				s.groups[g].unserved = true
			}
		}
	}
}

// countTick adds each group's CPUs of this tick to its period and its
// usage, and counts a stalled tick where the group is throttled: unserved
// after its own quota ran out while a CPU was still free.
func (s *hostSim) countTick() {
	for i := range s.groups {
		g := &s.groups[i]
		g.throttled = g.unserved && g.exhaustedAt < s.cpus
		p := &g.periods[len(g.periods)-1]
		p.Used += g.given
		g.usage += g.given
		if g.throttled {
			p.Stalled++
		}
	}
}

// finishTasks counts each unserved task's throttled tick, marks the groups
// above it as waiting (it had quota) or held (another group's quota held
// it), and takes this tick's CPUs off its work, finishing it at zero.
func (s *hostSim) finishTasks() {
	for i := range s.tasks {
		t := &s.tasks[i]
		if t.want == 0 {
			continue
		}
		if t.got < t.want {
			blocked := s.blocked(t.group)
			if blocked {
				t.res.Throttled++
			}
			for g := t.group; g >= 0; g = s.groups[g].parent {
				hg := &s.groups[g]
				hg.waiting = hg.waiting || !blocked
				hg.held = hg.held || (blocked && !hg.throttled)
			}
		}
		t.left -= t.got
		if t.left == 0 {
			t.res.Done = s.now + 1
			t.res.Latency = s.now + 1 - t.arrive
			s.pending--
		}
	}
}

// pick returns the sibling with room left this tick (given < cap) and the
// smallest virtual time, the first in order on a tie, or -1.
func (s *hostSim) pick(siblings []int) int {
	best := -1
	for _, i := range siblings {
		g := &s.groups[i]
		if g.given < g.cap && (best < 0 || g.vtime < s.groups[best].vtime) {
			best = i
		}
	}
	return best
}

// charge gives group i one CPU for this tick, the (ran+1)-th of the node.
func (s *hostSim) charge(i, ran int) {
	g := &s.groups[i]
	g.given++
	g.vtime += g.stride
	if !g.limited {
		return
	}
	g.remaining--
	if g.remaining == 0 {
		g.exhaustedAt = ran + 1
		if p := &g.periods[len(g.periods)-1]; p.Exhausted < 0 {
			p.Exhausted = s.now + 1
		}
	}
}

// blocked reports whether group i or an ancestor is throttled this tick.
func (s *hostSim) blocked(i int) bool {
	for ; i >= 0; i = s.groups[i].parent {
		if s.groups[i].throttled {
			return true
		}
	}
	return false
}

// record appends this tick to every group's trace, after the idle ticks
// skipped since the last one.
func (s *hostSim) record() {
	for i := range s.groups {
		g := &s.groups[i]
		g.trace = padTrace(g.trace, s.now)
		g.trace = append(g.trace, GroupTick{Ran: g.given, Throttled: g.throttled, Held: g.held, Waiting: g.waiting})
	}
}

// settle moves the virtual times of one set of siblings after a tick so
// that they measure only the service owed among groups still competing.
// base is the smallest virtual time of a sibling left wanting more CPUs
// than it got; every sibling's time is shifted by -base and kept at or
// above minus the largest stride of a sibling that could run, so a group
// that was idle, throttled or fully served earns at most one CPU-tick of
// lag. With no sibling left wanting, nobody is owed anything and all
// times are reset to 0.
func (s *hostSim) settle(siblings []int) {
	base, wanting := int64(0), false
	floor := int64(0)
	for _, i := range siblings {
		g := &s.groups[i]
		if g.cap > 0 {
			floor = max(floor, g.stride)
		}
		if g.given < g.cap && (!wanting || g.vtime < base) {
			base, wanting = g.vtime, true
		}
	}
	for _, i := range siblings {
		g := &s.groups[i]
		if !wanting {
			g.vtime = 0
			continue
		}
		g.vtime = max(g.vtime-base, -floor)
	}
}

// outcome collects the results.
func (s *hostSim) outcome() HostRun {
	run := HostRun{Ticks: s.now, Groups: make([]GroupRun, len(s.groups)), Tasks: make([]TaskRun, len(s.tasks))}
	tick := uint64(s.tick)
	for i := range s.groups {
		g := &s.groups[i]
		st := observe.CPUStat{UsageUsec: uint64(g.usage) * tick}
		st.UserUsec = st.UsageUsec
		if g.limited {
			st.NrPeriods = uint64(len(g.periods))
			for _, p := range g.periods {
				if p.Stalled > 0 {
					st.NrThrottled++
					st.ThrottledUsec += uint64(p.Stalled) * tick
				}
				if p.Used > g.quota {
					st.NrBursts++
					st.BurstUsec += uint64(p.Used-g.quota) * tick
				}
			}
		}
		var trace []GroupTick
		if s.trace > 0 {
			trace = padTrace(g.trace, min(s.trace, s.now))
		}
		run.Groups[i] = GroupRun{Name: s.host.Groups[i].Name, Stat: st, Periods: g.periods, Trace: trace}
	}
	for i, t := range s.tasks {
		run.Tasks[i] = TaskRun{Result: t.res, Group: s.host.Tasks[i].Group, Threads: t.threads}
	}
	return run
}

// padTrace extends trace with idle ticks up to length n.
func padTrace(trace []GroupTick, n int) []GroupTick {
	for len(trace) < n {
		trace = append(trace, GroupTick{})
	}
	return trace
}
