package observe

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ModelHost is what the throttling models (simulate's, docs/kernel-model.md)
// assume of the host they predict, as read from its kernel's files: the
// fair class enforcing cpu.max (no sched_ext scheduler), CFS bandwidth
// control built in, a kernel whose bandwidth code the model follows (5.4
// and later), a known CONFIG_HZ, a tick on every busy CPU and ticks
// aligned across CPUs. ReadModelHost reads it; Caveats decides.
type ModelHost struct {
	// Scheduler is the sched_ext state (ReadScheduler).
	Scheduler Scheduler
	// Release is the kernel release, /proc/sys/kernel/osrelease (uname -r);
	// ReleaseErr says why it could not be read.
	Release, ReleaseErr string
	// NoBandwidth is true when /proc/sys/kernel/sched_cfs_bandwidth_slice_us
	// does not exist: the kernel was built without CONFIG_CFS_BANDWIDTH.
	NoBandwidth bool
	// SliceUsec is the bandwidth slice, µs; SliceErr says why it could
	// not be read or parsed (then SliceUsec is 0).
	SliceUsec int64
	SliceErr  string
	// HZ is CONFIG_HZ; HZErr says why it could not be read (then HZ is 0,
	// and the models take DefaultHZ).
	HZ    int
	HZErr string
	// NohzFull is /sys/devices/system/cpu/nohz_full, the CPUs whose tick
	// may stop while they run one task ("" when none); NohzErr says why it
	// could not be understood.
	NohzFull, NohzErr string
	// SkewTick is true when the kernel command line has skew_tick=1: the
	// CPUs' ticks are offset from each other.
	SkewTick bool
}

// ReadModelHost reads the host below root (normally "/": root/sys,
// root/proc and root/boot). Nothing it cannot read is an error; it is
// said in the field it concerns, and Caveats names it.
func ReadModelHost(root string) ModelHost {
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	h := ModelHost{Scheduler: ReadScheduler(sys)}
	if b, err := os.ReadFile(filepath.Join(proc, "sys/kernel/osrelease")); err != nil {
		h.ReleaseErr = err.Error()
	} else {
		h.Release = strings.TrimSpace(string(b))
	}
	slicePath := filepath.Join(proc, "sys/kernel/sched_cfs_bandwidth_slice_us")
	b, err := os.ReadFile(slicePath)
	switch {
	case os.IsNotExist(err):
		h.NoBandwidth = true
	case err != nil:
		h.SliceErr = err.Error()
	default:
		if h.SliceUsec, err = ParseSliceUsec(b); err != nil {
			h.SliceErr = fmt.Sprintf("%s: %v", slicePath, err)
		}
	}
	if h.HZ, _, err = readHZ(proc, filepath.Join(root, "boot"), h.Release); err != nil {
		h.HZErr = err.Error()
	}
	nohzPath := filepath.Join(sys, "devices/system/cpu/nohz_full")
	if b, err := os.ReadFile(nohzPath); err == nil {
		if h.NohzFull, err = ParseNohzFull(b); err != nil {
			h.NohzErr = fmt.Sprintf("%s: %v", nohzPath, err)
		}
	} else if !os.IsNotExist(err) {
		h.NohzErr = err.Error()
	}
	if b, err := os.ReadFile(filepath.Join(proc, "cmdline")); err == nil {
		h.SkewTick = SkewTick(b)
	}
	return h
}

// ModelCaveat is one condition of a host that the throttling models do
// not cover, so that their predictions may not match what it does.
type ModelCaveat struct {
	// Reason names the condition in a word, for a metric's label:
	// sched_ext, no_cfs_bandwidth, slice_unknown, kernel_release,
	// hz_unknown, nohz_full or skew_tick (and tick_slice, from
	// metrics.PredictionCaveats).
	Reason string
	// Text says it in one plain clause.
	Text string
}

// ModelCaveats are the conditions found on a host; none when every
// assumption of the models holds.
type ModelCaveats []ModelCaveat

// Caveats decides which of the models' assumptions do not hold on h,
// in the order of ModelHost's fields.
func (h ModelHost) Caveats() ModelCaveats {
	var cs ModelCaveats
	add := func(reason, format string, args ...any) {
		cs = append(cs, ModelCaveat{Reason: reason, Text: fmt.Sprintf(format, args...)})
	}
	if c := h.Scheduler.Caveat(); c != "" {
		add("sched_ext", "%s", c)
	}
	major, minor, relErr := ParseKernelRelease(h.Release)
	switch {
	case h.ReleaseErr != "":
		add("kernel_release", "the kernel release cannot be read (%s), where the models follow the CFS bandwidth code of Linux 5.4 and later", h.ReleaseErr)
	case relErr != nil:
		add("kernel_release", "%v, where the models follow the CFS bandwidth code of Linux 5.4 and later", relErr)
	case major < 5 || major == 5 && minor < 4:
		add("kernel_release", "Linux %s is older than 5.4, whose CFS bandwidth code the models follow (before 5.4 a CPU's unused runtime expired at each period's end)", h.Release)
	}
	if h.NoBandwidth {
		add("no_cfs_bandwidth", "the kernel has no CFS bandwidth control (no /proc/sys/kernel/sched_cfs_bandwidth_slice_us: built without CONFIG_CFS_BANDWIDTH), so cpu.max throttles nothing")
	} else if h.SliceErr != "" {
		add("slice_unknown", "the CFS bandwidth slice cannot be read (%s), where the models take the kernel's default of %d µs", h.SliceErr, DefaultSliceUsec)
	}
	if h.HZErr != "" {
		add("hz_unknown", "CONFIG_HZ is not known (%s), where the models take %d, a tick of %d µs", h.HZErr, DefaultHZ, 1_000_000/DefaultHZ)
	}
	preEEVDF := relErr != nil || h.ReleaseErr != "" || major < 6 || major == 6 && minor < 6
	switch {
	case h.NohzErr != "":
		add("nohz_full", "the nohz_full CPUs cannot be read (%s), where the models check every busy CPU's quota at each tick", h.NohzErr)
	case h.NohzFull != "" && preEEVDF:
		add("nohz_full", "CPUs %s are nohz_full on a kernel before 6.6, which may stop the tick of a CPU running one task under cpu.max, where the models check its quota at each tick", h.NohzFull)
	}
	if h.SkewTick {
		add("skew_tick", "skew_tick=1 is on the kernel command line: the CPUs' ticks are offset from each other, where the models assume them aligned")
	}
	return cs
}

// Mechanisms are the caveats about how the kernel enforces cpu.max,
// without those about the settings read from the host (hz_unknown,
// slice_unknown): what holds for a prediction that is given its tick and
// slice, as a scenario or a recorded trace is.
func (cs ModelCaveats) Mechanisms() ModelCaveats {
	var out ModelCaveats
	for _, c := range cs {
		if c.Reason != "hz_unknown" && c.Reason != "slice_unknown" {
			out = append(out, c)
		}
	}
	return out
}

// Reasons are the caveats' reasons joined by commas, "" for none: a
// metric's label value.
func (cs ModelCaveats) Reasons() string {
	rs := make([]string, len(cs))
	for i, c := range cs {
		rs[i] = c.Reason
	}
	return strings.Join(rs, ",")
}

// String says every caveat in one sentence, "" for none.
func (cs ModelCaveats) String() string {
	if len(cs) == 0 {
		return ""
	}
	ts := make([]string, len(cs))
	for i, c := range cs {
		ts[i] = c.Text
	}
	return "the throttling prediction may not match this host: " + strings.Join(ts, "; ")
}

// ParseKernelRelease returns the major and minor version of a kernel
// release as uname -r prints it ("6.18.44-fc-v1272", "6.1.0-57-cloud-amd64",
// "5.4"): two numbers separated by a dot, then anything.
func ParseKernelRelease(release string) (major, minor int, err error) {
	bad := func() (int, int, error) {
		r := release
		if len(r) > 64 {
			r = r[:64] + "…"
		}
		return 0, 0, fmt.Errorf("kernel release %q not understood (accepted: MAJOR.MINOR, then anything, as uname -r prints it)", r)
	}
	maj, rest, ok := strings.Cut(release, ".")
	if !ok {
		return bad()
	}
	mnr := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		mnr = rest[:i]
	}
	major, err1 := strconv.Atoi(maj)
	minor, err2 := strconv.Atoi(mnr)
	if err1 != nil || err2 != nil || major < 0 || minor < 0 || len(maj) > 4 || len(mnr) > 4 {
		return bad()
	}
	return major, minor, nil
}

// ParseNohzFull parses /sys/devices/system/cpu/nohz_full: a CPU list
// ("1-3,5\n"), or "(null)" or nothing when no CPU is nohz_full (then "").
// Accepted: digits, commas and dashes.
func ParseNohzFull(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	if s == "(null)" {
		return "", nil
	}
	if strings.Trim(s, "0123456789,-") != "" || len(s) > 4096 {
		if len(s) > 32 {
			s = s[:32] + "…"
		}
		return "", fmt.Errorf("CPU list %q not understood (accepted: a list such as 1-3,5, or (null))", s)
	}
	return s, nil
}

// SkewTick reports whether a kernel command line (/proc/cmdline) turns
// skew_tick on: skew_tick=N with N a number other than 0, the last one
// given counting, as the kernel reads its parameters.
func SkewTick(cmdline []byte) bool {
	on := false
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "skew_tick="); ok {
			n, err := strconv.ParseInt(v, 0, 64)
			on = err == nil && n != 0
		}
	}
	return on
}
