package simulate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// Scenario is a parsed scenario file (docs/scenario.md): the node, its
// groups and the tasks to simulate.
type Scenario struct {
	// Name is where the scenario came from: the file name given to
	// ParseScenario, or a description for a built-in one.
	Name string
	// Host is the node to simulate; it passes Host.Validate.
	Host Host
	// Pools is the planner's desired cgroup state when the file has a
	// pools block (YDB DDL): the exact cpu.max, cpu.max.burst and
	// cpu.weight of every pool and its per-query template, for a real run.
	// Nil without a pools block.
	Pools *planner.Desired
	// TaskCPUs pins tasks, by name, to CPUs of the node (a task's cpus
	// setting). The simple model ignores placement; the kernel-faithful
	// model and a real run honour it.
	TaskCPUs map[string][]int
	// GroupLines and TaskLines are the 1-based lines of the file that
	// declared Host.Groups[i] and Host.Tasks[i]; a group a pools block
	// made has the line of its "pools" keyword (a per-query group, its
	// task's line). Nil for a built-in scenario.
	GroupLines, TaskLines []int
}

// GroupAt names where group i of the host was declared, for errors:
// "web.scn:3", or the scenario's name when no line is known.
func (s *Scenario) GroupAt(i int) string { return s.at(s.GroupLines, i) }

// TaskAt names where task i of the host was declared, as GroupAt.
func (s *Scenario) TaskAt(i int) string { return s.at(s.TaskLines, i) }

func (s *Scenario) at(lines []int, i int) string {
	if i < 0 || i >= len(lines) || lines[i] == 0 {
		return s.Name
	}
	return fmt.Sprintf("%s:%d", s.Name, lines[i])
}

// ScenarioError is one problem of a scenario file. ParseScenario joins all
// of a file's problems with errors.Join. It unwraps to [ErrInvalidInput].
type ScenarioError struct {
	// File is the scenario's name as given to ParseScenario.
	File string
	// Line is the 1-based line of the problem, or 0 for the whole file.
	Line int
	// Msg says what is wrong and what would be accepted.
	Msg string
}

// Error reads like "web.scn:3: quota 40 has no unit (accepted: ...)", or
// "web.scn: ..." for the whole file.
func (e *ScenarioError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Unwrap returns [ErrInvalidInput].
func (e *ScenarioError) Unwrap() error { return ErrInvalidInput }

// Defaults of a scenario file for what a line leaves out.
const (
	// DefaultTickUsec is the tick without a "tick" line: 1 ms, the
	// chapter's scale of one tick per millisecond.
	DefaultTickUsec int64 = 1000
)

// durationHint is what a duration value accepts, for error messages.
const durationHint = "accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s"

// ParseScenario parses a scenario file named name (used in errors). On any
// problem it returns nil and every problem found, each a [*ScenarioError]
// with its line, joined with errors.Join; nothing of a file with an error
// is used.
func ParseScenario(name string, src []byte) (*Scenario, error) {
	p := &scenarioParser{file: name, h: Host{TickUsec: DefaultTickUsec}}
	for i, line := range strings.Split(string(src), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		p.line = i + 1
		if p.inPools(fields, line) {
			continue
		}
		switch fields[0] {
		case "cpus":
			p.cpus(fields[1:])
		case "tick":
			p.tick(fields[1:])
		case "group":
			p.group(fields[1:])
		case "task":
			p.task(fields[1:])
		case "pools":
			p.poolsBlock(fields[1:])
		default:
			p.fail("unknown keyword %q (accepted: cpus, tick, group, task, pools)", fields[0])
		}
	}
	if p.cpusLine == 0 {
		p.line = 0
		p.fail("no cpus line (add one, e.g. cpus 8)")
	}
	p.finishPools()
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	if err := p.h.Validate(); err != nil {
		p.locate(err)
		return nil, errors.Join(p.errs...)
	}
	return &Scenario{Name: name, Host: p.h, Pools: p.pools.desired, TaskCPUs: p.pools.taskCPUs,
		GroupLines: p.groupLines, TaskLines: p.taskLines}, nil
}

// scenarioParser collects a Host and the lines its parts came from.
type scenarioParser struct {
	file       string
	line       int
	h          Host
	cpusLine   int
	tickLine   int
	groupLines []int
	taskLines  []int
	pools      poolsState
	errs       []error
}

func (p *scenarioParser) fail(msg string, args ...any) {
	p.errs = append(p.errs, &ScenarioError{File: p.file, Line: p.line, Msg: fmt.Sprintf(msg, args...)})
}

// locate turns the [*HostError] values of Host.Validate into errors at the
// lines that defined the rejected parts.
func (p *scenarioParser) locate(err error) {
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		he := e.(*HostError)
		line := 0
		switch {
		case he.Group >= 0:
			line = p.groupLines[he.Group]
		case he.Task >= 0:
			line = p.taskLines[he.Task]
		case he.Field == "cpus":
			line = p.cpusLine
		case he.Field == "tick":
			line = p.tickLine
		}
		p.errs = append(p.errs, &ScenarioError{File: p.file, Line: line, Msg: he.Msg})
	}
}

// once reports whether a keyword that may appear once is seen for the
// first time, and records its line.
func (p *scenarioParser) once(keyword string, seen *int) bool {
	if *seen != 0 {
		p.fail("%s is already set on line %d (accepted: one %s line)", keyword, *seen, keyword)
		return false
	}
	*seen = p.line
	return true
}

// cpus parses "cpus N".
func (p *scenarioParser) cpus(args []string) {
	if !p.once("cpus", &p.cpusLine) {
		return
	}
	if len(args) != 1 {
		p.fail("cpus takes one number (e.g. cpus 8)")
		return
	}
	if n, ok := p.count("cpus", args[0]); ok {
		p.h.CPUs = n
	}
}

// tick parses "tick DURATION".
func (p *scenarioParser) tick(args []string) {
	if !p.once("tick", &p.tickLine) {
		return
	}
	if len(args) != 1 {
		p.fail("tick takes one duration (e.g. tick 1ms)")
		return
	}
	if d, ok := p.duration("tick", args[0]); ok {
		p.h.TickUsec = d
	}
}

// group parses "group NAME [quota Q|max] [period P] [burst B] [weight W]
// [parent G]".
func (p *scenarioParser) group(args []string) {
	if len(args) == 0 {
		p.fail("group needs a name (e.g. group web quota 40ms period 100ms)")
		return
	}
	g := Group{Name: args[0], Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: cpulimit.DefaultPeriodUsec, Weight: cpulimit.DefaultWeight}}
	p.settings("group", args[1:], map[string]func(string) bool{
		"quota": func(v string) (ok bool) {
			if v == "max" {
				return true
			}
			g.QuotaUsec, ok = p.duration("quota", v)
			return ok
		},
		"period": func(v string) (ok bool) { g.PeriodUsec, ok = p.duration("period", v); return ok },
		"burst":  func(v string) (ok bool) { g.BurstUsec, ok = p.duration("burst", v); return ok },
		"weight": func(v string) (ok bool) { w, ok := p.count("weight", v); g.Weight = int64(w); return ok },
		"parent": func(v string) bool { g.Parent = v; return true },
	}, "quota, period, burst, weight, parent")
	p.h.Groups = append(p.h.Groups, g)
	p.groupLines = append(p.groupLines, p.line)
}

// task parses "task NAME group G need N [arrive A] [threads T]".
func (p *scenarioParser) task(args []string) {
	if len(args) == 0 {
		p.fail("task needs a name (e.g. task t1 group web need 10ms)")
		return
	}
	t := HostTask{Name: args[0], NeedUsec: -1, Threads: 1}
	p.settings("task", args[1:], map[string]func(string) bool{
		"group":   func(v string) bool { t.Group = v; return true },
		"arrive":  func(v string) (ok bool) { t.ArriveUsec, ok = p.duration("arrive", v); return ok },
		"need":    func(v string) (ok bool) { t.NeedUsec, ok = p.duration("need", v); return ok },
		"threads": func(v string) (ok bool) { t.Threads, ok = p.count("threads", v); return ok },
		"cpus":    func(v string) bool { return p.pin(t.Name, v) },
	}, "group, arrive, need, threads, cpus")
	if t.Group == "" {
		p.fail("task %s has no group (add: group NAME)", t.Name)
	}
	if t.NeedUsec < 0 {
		p.fail("task %s has no need (add: need DURATION, e.g. need 10ms)", t.Name)
	}
	p.h.Tasks = append(p.h.Tasks, t)
	p.taskLines = append(p.taskLines, p.line)
}

// settings parses "KEY VALUE" pairs; set has one setter per key, which
// reports whether the value was accepted.
func (p *scenarioParser) settings(what string, args []string, set map[string]func(string) bool, keys string) {
	seen := make(map[string]bool, len(set))
	for i := 0; i < len(args); i += 2 {
		key := args[i]
		setter, ok := set[key]
		switch {
		case !ok:
			p.fail("unknown %s setting %q (accepted: %s)", what, key, keys)
			return
		case seen[key]:
			p.fail("%s is given twice (accepted: each setting once)", key)
			return
		case i+1 == len(args):
			p.fail("%s needs a value (accepted: %s KEY VALUE ..., with KEY one of %s)", key, what, keys)
			return
		}
		seen[key] = true
		if !setter(args[i+1]) {
			return
		}
	}
}

// count parses a whole number >= 1.
func (p *scenarioParser) count(key, v string) (int, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || !isDigits(v) || n < 1 {
		p.fail("%s %q is not accepted (accepted: a whole number, 1 or more)", key, v)
		return 0, false
	}
	return n, true
}

// duration parses "0" or a whole number with a unit into microseconds.
func (p *scenarioParser) duration(key, v string) (int64, bool) {
	d, err := parseUsec(v)
	if err != nil {
		p.fail("%s %q %v (%s)", key, v, err, durationHint)
		return 0, false
	}
	return d, true
}

// parseUsec parses "0" or digits followed by us, µs, ms or s into
// microseconds; the error completes a sentence such as `quota "40" ...`.
func parseUsec(v string) (int64, error) {
	digits := strings.TrimRight(v, "abcdefghijklmnopqrstuvwxyzµ")
	unit := v[len(digits):]
	if digits == "" || !isDigits(digits) {
		return 0, errors.New("is not a whole number with a unit")
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, errors.New("is too large")
	}
	var scale int64
	switch unit {
	case "us", "µs":
		scale = 1
	case "ms":
		scale = 1_000
	case "s":
		scale = 1_000_000
	case "":
		if n == 0 {
			return 0, nil
		}
		return 0, errors.New("has no unit")
	default:
		return 0, fmt.Errorf("has an unknown unit %q", unit)
	}
	if n > math.MaxInt64/scale {
		return 0, errors.New("is too large")
	}
	return n * scale, nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
