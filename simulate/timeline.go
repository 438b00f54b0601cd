package simulate

import (
	"strings"
)

// Timeline marks, in the chapter's style.
const (
	markRan       = '■' // the group ran on at least one CPU
	markThrottled = '·' // a thread wanted to run, but a quota on its path was spent
	markWaiting   = '-' // a thread wanted to run and had quota, but no CPU was free
	markIdle      = ' ' // nothing to run
)

// timelineWidth is the most marks a period's line gets; longer periods
// put several ticks into one mark.
const timelineWidth = 50

// TimelineTicks is how many ticks of trace (HostOptions.TraceTicks) a text
// report of h needs to draw the first periods of every group.
func TimelineTicks(h Host, periods int) int {
	longest := int64(0)
	for _, g := range h.Groups {
		longest = max(longest, g.PeriodUsec/h.TickUsec)
	}
	return periods * int(longest)
}

// ticksPerMark is the bucket of ticks one mark stands for, so that a
// period fits in timelineWidth marks.
func ticksPerMark(periodTicks int) int {
	return (periodTicks + timelineWidth - 1) / timelineWidth
}

// timelineLine draws ticks [start, end) of trace, one mark per bucket of
// ticks; it stops where the trace ends. A bucket shows what the group did
// in most of its ticks; on a tie ran beats throttled beats waiting beats
// idle, so a bucket with any running in a two-tick bucket shows ■.
func timelineLine(trace []GroupTick, start, end, bucket int) string {
	var b strings.Builder
	end = min(end, len(trace))
	for from := start; from < end; from += bucket {
		var ran, throttled, waiting, idle int
		for _, tk := range trace[from:min(from+bucket, end)] {
			switch {
			case tk.Ran > 0:
				ran++
			case tk.Throttled || tk.Held:
				throttled++
			case tk.Waiting:
				waiting++
			default:
				idle++
			}
		}
		mark := markRan
		switch top := max(ran, throttled, waiting, idle); top {
		case ran:
		case throttled:
			mark = markThrottled
		case waiting:
			mark = markWaiting
		default:
			mark = markIdle
		}
		b.WriteRune(mark)
	}
	return strings.TrimRight(b.String(), string(markIdle))
}
