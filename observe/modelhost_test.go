package observe

import (
	"path/filepath"
	"strings"
	"testing"
)

// fairClass ends the clause of every sched_ext caveat.
const fairClass = ", where the models assume the kernel's fair class (CFS/EEVDF)"

// TestReadModelHost reads the literal host trees of testdata/host and
// pins, word for word, what a user is told of each: the message test of
// the models' caveats (the tree's own path is written as ROOT).
func TestReadModelHost(t *testing.T) {
	tests := []struct {
		tree, reasons, text string
	}{
		{"fair", "", ""},
		{"scx-disabled", "", ""},
		{"scx-rusty", "sched_ext", `sched_ext is enabled: the BPF scheduler "rusty" schedules every task and enforces cpu.max its own way` + fairClass},
		{"scx-garbage", "sched_ext", `cannot tell which scheduler enforces cpu.max (ROOT/sys/kernel/sched_ext/state: state "on fire" not understood (accepted: disabled, enabling, enabled, disabling))` + fairClass},
		{"scx-unreadable", "sched_ext", "cannot tell which scheduler enforces cpu.max (read ROOT/sys/kernel/sched_ext/state: is a directory)" + fairClass},
		{"old", "kernel_release,no_cfs_bandwidth,hz_unknown,nohz_full,skew_tick",
			"Linux 5.3.18-lp152 is older than 5.4, whose CFS bandwidth code the models follow (before 5.4 a CPU's unused runtime expired at each period's end); " +
				"the kernel has no CFS bandwidth control (no /proc/sys/kernel/sched_cfs_bandwidth_slice_us: built without CONFIG_CFS_BANDWIDTH), so cpu.max throttles nothing; " +
				"CONFIG_HZ is not known (no kernel configuration: open ROOT/proc/config.gz: no such file or directory; open ROOT/boot/config-5.3.18-lp152: no such file or directory), where the models take 250, a tick of 4000 µs; " +
				"CPUs 1-3 are nohz_full on a kernel before 6.6, which may stop the tick of a CPU running one task under cpu.max, where the models check its quota at each tick; " +
				"skew_tick=1 is on the kernel command line: the CPUs' ticks are offset from each other, where the models assume them aligned"},
		{"garbage", "kernel_release,slice_unknown,hz_unknown,nohz_full",
			`kernel release "banana" not understood (accepted: MAJOR.MINOR, then anything, as uname -r prints it), where the models follow the CFS bandwidth code of Linux 5.4 and later; ` +
				`the CFS bandwidth slice cannot be read (ROOT/proc/sys/kernel/sched_cfs_bandwidth_slice_us: sched_cfs_bandwidth_slice_us "0": want a whole number of microseconds, 1 or more), where the models take the kernel's default of 5000 µs; ` +
				`CONFIG_HZ is not known (no kernel configuration: open ROOT/proc/config.gz: no such file or directory; ROOT/boot/config-banana: CONFIG_HZ="fast": want a number 100..10000), where the models take 250, a tick of 4000 µs; ` +
				`the nohz_full CPUs cannot be read (ROOT/sys/devices/system/cpu/nohz_full: CPU list "cpu one" not understood (accepted: a list such as 1-3,5, or (null))), where the models check every busy CPU's quota at each tick`},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			root := filepath.Join("testdata/host", tt.tree)
			cs := ReadModelHost(root).Caveats()
			if got := cs.Reasons(); got != tt.reasons {
				t.Errorf("reasons %q, want %q", got, tt.reasons)
			}
			want := ""
			if tt.text != "" {
				want = "the throttling prediction may not match this host: " + tt.text
			}
			if got := strings.ReplaceAll(cs.String(), root, "ROOT"); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestModelHostKernelClass: the kernel release decides the nohz_full
// caveat (6.6 keeps the tick of a CPU running under cpu.max) and the
// release floor (5.4).
func TestModelHostKernelClass(t *testing.T) {
	for host, want := range map[ModelHost]string{
		{Release: "6.6.0", NohzFull: "1-3"}:         "",
		{Release: "6.5.13-gentoo", NohzFull: "1-3"}: "nohz_full",
		{Release: "6.1.0-57-cloud-amd64"}:           "",
		{Release: "5.4.0-200-generic"}:              "",
		{Release: "4.19.0"}:                         "kernel_release",
		{Release: "6"}:                              "kernel_release",
		{Release: "6", NohzFull: "2"}:               "kernel_release,nohz_full",
	} {
		if got := host.Caveats().Reasons(); got != want {
			t.Errorf("%+v: reasons %q, want %q", host, got, want)
		}
	}
}

func TestParseKernelRelease(t *testing.T) {
	for _, tt := range []struct {
		in           string
		major, minor int
	}{{"6.18.44-fc-v1272", 6, 18}, {"6.1.0-57-cloud-amd64", 6, 1}, {"5.4", 5, 4}, {"6.6-rc1", 6, 6}} {
		if major, minor, err := ParseKernelRelease(tt.in); err != nil || major != tt.major || minor != tt.minor {
			t.Errorf("%q: %d.%d, %v", tt.in, major, minor, err)
		}
	}
	for _, bad := range []string{"", "6", "six.1", "6.x", "-1.2", "6.123456"} {
		if _, _, err := ParseKernelRelease(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSkewTick(t *testing.T) {
	for in, want := range map[string]bool{
		"": false, "quiet": false, "skew_tick=1": true, "a skew_tick=0 b": false,
		"skew_tick=1 skew_tick=0": false, "skew_tick=0 skew_tick=2": true, "skew_tick=yes": false, "noskew_tick=1": false,
	} {
		if got := SkewTick([]byte(in)); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

// The parsers of the host's kernel files the models' caveats read: their
// corpus is in testdata/fuzz/.

func FuzzParseSchedExtState(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSchedExtState(b)
		if err != nil {
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes for %d bytes of input: %s", len(err.Error()), len(b), err)
			}
			return
		}
		if again, err := ParseSchedExtState([]byte(s + "\n")); err != nil || again != s {
			t.Errorf("%q parsed as %q, which parses back as %q, %v", b, s, again, err)
		}
	})
}

func FuzzParseKernelRelease(f *testing.F) {
	f.Fuzz(func(t *testing.T, release string) {
		major, minor, err := ParseKernelRelease(release)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes: %s", len(err.Error()), err)
			}
			return
		}
		if major < 0 || minor < 0 || major > 9999 || minor > 9999 {
			t.Errorf("%q: accepted %d.%d", release, major, minor)
		}
		// The credit is CFS's, before 6.6, and at most 12 ms (8 CPUs or more).
		if c := WakeCreditUsec(release, 64); c < 0 || c > 12000 || (c > 0) != (major < 6 || major == 6 && minor < 6) {
			t.Errorf("%q: wake credit %d µs", release, c)
		}
	})
}

func FuzzParseNohzFull(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseNohzFull(b)
		if err != nil {
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes: %s", len(err.Error()), err)
			}
			return
		}
		if strings.Trim(s, "0123456789,-") != "" {
			t.Errorf("%q accepted as CPU list %q", b, s)
		}
	})
}

func FuzzSkewTick(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if SkewTick(b) && !strings.Contains(string(b), "skew_tick=") {
			t.Errorf("%q: skew_tick on without the parameter", b)
		}
	})
}
