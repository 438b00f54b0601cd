// Command benchstart times how long starting a short command in a cgroup
// takes, interleaved: `poolagent-run -- CMD`, `poolagent run -- CMD` (both
// against a real `poolagent daemon` it starts on a fresh pool root),
// libcgroup's `cgexec -g cpu:GROUP CMD` into a fresh cgroup, CMD alone,
// `goexec CMD`, a Go program that only execs CMD (the -bin directory
// holds it beside the poolagent binaries): no cgroup, the floor of a Go
// program, and `goexec -ask SOCKET CMD`, which asks the daemon for the
// query in place first with one hand-written request and nothing else:
// the floor of any client of the daemon. It prints each way's median wall time and its ratio to
// cgexec's, both as the ratio of the medians and as the median of the
// ratios within each round, and its 90th percentile. With -socket PATH it
// times the clients against a daemon already running there (the installed
// service of the systemd VM) instead of starting one. With -label NAME it
// also prints each way's figures as one tab-separated line that starts
// with "benchstart-row" and NAME, for scripts/bench-start.sh's table of
// every hierarchy. With -base DIR, the poolagent and
// poolagent-run of another build (the tree before a change) are timed in
// the same rounds against a daemon of their own, on its own pool root and
// state directory, and it prints this build's time over the base's: the
// ratio of the medians, and the minimum, median and maximum of the ratios
// round by round. scripts/bench-start.sh builds and
// runs it on the host and in the cgroup v2 VM, scripts/bench-against.sh
// against an earlier revision; it needs root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "", "`DIR` holding the poolagent, poolagent-run and goexec binaries")
	cgexec := flag.String("cgexec", "/usr/bin/cgexec", "libcgroup's cgexec `PATH`")
	command := flag.String("cmd", "/bin/true", "the short `COMMAND` each way starts")
	runs := flag.Int("runs", 40, "rounds; each round runs every way once, in a rotating order")
	base := flag.String("base", "", "`DIR` holding another build's poolagent and poolagent-run, timed beside -bin's (optional)")
	socket := flag.String("socket", "", "the socket `PATH` of a daemon already running, to time the clients against (optional; not with -base)")
	label := flag.String("label", "", "print each way's figures also as a tab-separated line \"benchstart-row NAME ...\" (optional)")
	flag.Parse()
	if err := run(*bin, *base, *socket, *label, *cgexec, *command, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "benchstart:", err)
		os.Exit(1)
	}
}

// way is one way of starting the command, and its times.
type way struct {
	name string
	argv []string
	wall []time.Duration
}

func run(bin, base, socket, label, cgexec, command string, runs int) error {
	if bin == "" || runs < 1 {
		return errors.New("give -bin DIR and -runs N >= 1")
	}
	if base != "" && socket != "" {
		return errors.New("-base starts a daemon of each build: give -base or -socket, not both")
	}
	cpu, v2, err := cpuHierarchy()
	if err != nil {
		return err
	}
	if err := ensureUserDatabase(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "benchstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	name := fmt.Sprintf("poolagent-bench-start-%d", os.Getpid())
	group := name + "-cgexec"
	if err := os.Mkdir(filepath.Join(cpu, group), 0o755); err != nil {
		return fmt.Errorf("cgexec's group: %w", err)
	}
	defer removeTree(filepath.Join(cpu, group))

	if socket == "" {
		var stop func()
		socket, stop, err = startDaemon(bin, filepath.Join(tmp, "this"), cpu, name, v2)
		if err != nil {
			return err
		}
		defer stop()
	}
	ways := []*way{
		{name: "poolagent-run -- " + command, argv: []string{filepath.Join(bin, "poolagent-run"), "--socket", socket, "--", command}},
		{name: "poolagent run -- " + command, argv: []string{filepath.Join(bin, "poolagent"), "run", "--socket", socket, "--", command}},
		{name: "cgexec -g cpu:G " + command, argv: []string{cgexec, "-g", "cpu:" + group, command}},
		{name: command, argv: []string{command}},
		{name: "goexec " + command, argv: []string{filepath.Join(bin, "goexec"), command}},
		{name: "goexec -ask S " + command, argv: []string{filepath.Join(bin, "goexec"), "-ask", socket, command}},
	}
	ours := len(ways)
	if base != "" {
		baseSocket, stopBase, err := startDaemon(base, filepath.Join(tmp, "base"), cpu, name+"-base", v2)
		if err != nil {
			return err
		}
		defer stopBase()
		ways = append(ways,
			&way{name: "base: poolagent-run -- " + command, argv: []string{filepath.Join(base, "poolagent-run"), "--socket", baseSocket, "--", command}},
			&way{name: "base: poolagent run -- " + command, argv: []string{filepath.Join(base, "poolagent"), "run", "--socket", baseSocket, "--", command}})
	}
	load := loadAverage()
	if err := measure(ways, runs); err != nil {
		return err
	}
	mode := "cgroup v1"
	if v2 {
		mode = "cgroup v2"
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("%s (%s), kernel %s, load average %s before, %s after; %d rounds, each way once per round in rotating order\n",
		mode, cpu, strings.TrimSpace(string(kernel)), load, loadAverage(), runs)
	printRatios(ways, ours)
	if label != "" {
		printRows(label, mode, ways)
	}
	return nil
}

// measure starts each way once to warm up, not counted (page cache, the
// daemons' first query), then runs the rounds: every way once per round,
// in an order that rotates from round to round.
func measure(ways []*way, runs int) error {
	for _, w := range ways {
		if _, err := start(w.argv); err != nil {
			return err
		}
	}
	for i := range runs {
		if i%10 == 0 {
			fmt.Fprintf(os.Stderr, "benchstart: round %d of %d\n", i+1, runs)
		}
		for j := range ways {
			w := ways[(i+j)%len(ways)]
			d, err := start(w.argv)
			if err != nil {
				return err
			}
			w.wall = append(w.wall, d)
		}
	}
	return nil
}

// printRatios prints each way's median and its ratio to cgexec's (ways[2]),
// of the medians and paired within each round; with a base build (its two
// ways after the first ours), also this build's two ways over the base's:
// the ratio of the medians, and the ratios round by round.
func printRatios(ways []*way, ours int) {
	fmt.Println("ratio: median over cgexec's median; paired: median of the ratios to cgexec within each round")
	cgexecWay := ways[2]
	fmt.Printf("%-42s %10s %8s %8s %8s\n", "way", "median ms", "p90 ms", "ratio", "paired")
	for _, w := range ways {
		fmt.Printf("%-42s %10.2f %8.2f %8.2f %8.2f\n", w.name, ms(median(w.wall)), ms(percentile(w.wall, 90)),
			float64(median(w.wall))/float64(median(cgexecWay.wall)), median(ratios(w.wall, cgexecWay.wall)))
	}
	if len(ways) > ours {
		fmt.Println("this build over the base (< 1: this build starts faster): the ratio of the medians, and min, median and max of the ratios round by round:")
		fmt.Printf("%-42s %8s %8s %8s %8s\n", "way", "medians", "min", "median", "max")
		for i, w := range ways[:2] {
			b := ways[ours+i].wall
			r := ratios(w.wall, b)
			fmt.Printf("%-42s %8.3f %8.3f %8.3f %8.3f\n", w.name, float64(median(w.wall))/float64(median(b)), slices.Min(r), median(r), slices.Max(r))
		}
	}
}

// printRows prints each way's figures as printRatios does, one
// tab-separated line a way: "benchstart-row", label, the hierarchy
// ("cgroup v1" or "cgroup v2"), the way's name, its median and 90th
// percentile in ms, its ratio to cgexec's median and the median of its
// paired ratios.
func printRows(label, mode string, ways []*way) {
	cgexecWay := ways[2]
	for _, w := range ways {
		fmt.Printf("benchstart-row\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\n", label, mode, w.name, ms(median(w.wall)), ms(percentile(w.wall, 90)),
			float64(median(w.wall))/float64(median(cgexecWay.wall)), median(ratios(w.wall, cgexecWay.wall)))
	}
}

// startDaemon starts `poolagent daemon` of the bin directory on a fresh
// pool root named name below the cpu hierarchy, with an empty pool file,
// its socket and its state directory in dir; stop ends it and removes the
// pool root.
func startDaemon(bin, dir, cpu, name string, v2 bool) (socket string, stop func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	socket = filepath.Join(dir, "agent.sock")
	pools := filepath.Join(dir, "pools.sql")
	if err := os.WriteFile(pools, nil, 0o644); err != nil {
		return "", nil, err
	}
	root := filepath.Join(cpu, name)
	daemon := exec.Command(filepath.Join(bin, "poolagent"), "daemon", "--pools", pools, "--root", root,
		"--socket", socket, "--state-dir", filepath.Join(dir, "state"), "--create-state-dir",
		"--cpus", "2", "--memory", "1073741824", "--log-level", "warn")
	daemon.Stderr = os.Stderr
	if err := daemon.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		removeTree(root)
		if !v2 {
			removeTree(filepath.Join(filepath.Dir(cpu), "cpuacct", name))
		}
	}
	if err := waitSocket(socket); err != nil {
		stop()
		return "", nil, err
	}
	return socket, stop, nil
}

// ratios are a[i]/b[i], round by round.
func ratios(a, b []time.Duration) []float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	return r
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAverage() string {
	load, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(load))[:3], " ")
}

// start runs argv with no input or output and returns its wall time from
// fork to reaped; a status other than 0, or a minute, is an error.
func start(argv []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	begin := time.Now()
	err := cmd.Run()
	d := time.Since(begin)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return d, nil
}

// cpuHierarchy returns where the cpu controller is mounted and whether
// that is cgroup v2.
func cpuHierarchy() (string, bool, error) {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "", false, err
	}
	var unified string
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		switch f[2] {
		case "cgroup":
			if slices.Contains(strings.Split(f[3], ","), "cpu") {
				return f[1], false, nil
			}
		case "cgroup2":
			unified = f[1]
		}
	}
	if unified != "" {
		ctrl, err := os.ReadFile(filepath.Join(unified, "cgroup.subtree_control"))
		if err == nil && slices.Contains(strings.Fields(string(ctrl)), "cpu") {
			return unified, true, nil
		}
	}
	return "", false, errors.New("no cgroup hierarchy with the cpu controller")
}

// ensureUserDatabase writes a root-only /etc/passwd and /etc/group where
// there are none (the test VM's initramfs), so the daemon can name its
// callers.
func ensureUserDatabase() error {
	for file, line := range map[string]string{"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "/etc/group": "root:x:0:\n"} {
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.MkdirAll("/etc", 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(line), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func waitSocket(socket string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the daemon did not listen on %s within 30 s", socket)
}

// removeTree removes the cgroup dir and every cgroup below it, deepest
// first.
func removeTree(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}

func median[T time.Duration | float64](v []T) T { return percentile(v, 50) }

// percentile is the p-th percentile of v, the nearest rank.
func percentile[T time.Duration | float64](v []T, p int) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
