// Command benchstart times how long starting a short command in a cgroup
// takes, interleaved: `poolagent-run -- CMD`, `poolagent run -- CMD` (both
// against a real `poolagent daemon` it starts on a fresh pool root),
// libcgroup's `cgexec -g cpu:GROUP CMD` into a fresh cgroup, CMD alone,
// and `goexec CMD`, a Go program that only execs CMD (the -bin directory
// holds it beside the poolagent binaries): no cgroup, the floor of a Go
// client. It prints each way's median wall time and its ratio to
// cgexec's, both as the ratio of the medians and as the median of the
// ratios within each round. scripts/bench-start.sh builds and runs it on
// the host and in the cgroup v2 VM; it needs root.
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
	flag.Parse()
	if err := run(*bin, *cgexec, *command, *runs); err != nil {
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

func run(bin, cgexec, command string, runs int) error {
	if bin == "" || runs < 1 {
		return errors.New("give -bin DIR and -runs N >= 1")
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
	root := filepath.Join(cpu, name)
	group := name + "-cgexec"
	if err := os.Mkdir(filepath.Join(cpu, group), 0o755); err != nil {
		return fmt.Errorf("cgexec's group: %w", err)
	}
	defer removeTree(filepath.Join(cpu, group))

	socket := filepath.Join(tmp, "agent.sock")
	daemon, err := startDaemon(bin, tmp, root, socket)
	if err != nil {
		return err
	}
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		removeTree(root)
		if !v2 {
			removeTree(filepath.Join(filepath.Dir(cpu), "cpuacct", name))
		}
	}()
	if err := waitSocket(socket); err != nil {
		return err
	}

	ways := []*way{
		{name: "poolagent-run -- " + command, argv: []string{filepath.Join(bin, "poolagent-run"), "--socket", socket, "--", command}},
		{name: "poolagent run -- " + command, argv: []string{filepath.Join(bin, "poolagent"), "run", "--socket", socket, "--", command}},
		{name: "cgexec -g cpu:G " + command, argv: []string{cgexec, "-g", "cpu:" + group, command}},
		{name: command, argv: []string{command}},
		{name: "goexec " + command, argv: []string{filepath.Join(bin, "goexec"), command}},
	}
	if err := measure(ways, runs); err != nil {
		return err
	}
	mode := "cgroup v1 (cpu hierarchy " + cpu + ")"
	if v2 {
		mode = "cgroup v2 (" + cpu + ")"
	}
	printResults(ways, ways[2], mode, runs)
	return nil
}

// startDaemon starts `poolagent daemon` from bin with no pools on a fresh
// pool root, serving socket; its pool file is in tmp.
func startDaemon(bin, tmp, root, socket string) (*exec.Cmd, error) {
	pools := filepath.Join(tmp, "pools.sql")
	if err := os.WriteFile(pools, nil, 0o644); err != nil {
		return nil, err
	}
	daemon := exec.Command(filepath.Join(bin, "poolagent"), "daemon", "--pools", pools, "--root", root,
		"--socket", socket, "--cpus", "2", "--memory", "1073741824", "--log-level", "warn")
	daemon.Stderr = os.Stderr
	if err := daemon.Start(); err != nil {
		return nil, err
	}
	return daemon, nil
}

// measure starts each way once to warm up, not counted (page cache, the
// daemon's first query), then runs rounds: every way once per round, in
// an order that rotates from round to round.
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

// printResults prints the machine (mode is the cgroup hierarchy), then
// each way's median and its ratio to base's, both of the medians and the
// median of the ratios within each round.
func printResults(ways []*way, base *way, mode string, runs int) {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%s, kernel %s, load average %s; %d rounds, each way once per round in rotating order\n",
		mode, strings.TrimSpace(string(kernel)), strings.Join(strings.Fields(string(load))[:3], " "), runs)
	fmt.Println("ratio: median over cgexec's median; paired: median of the ratios to cgexec within each round")
	fmt.Printf("%-36s %10s %8s %8s\n", "way", "median ms", "ratio", "paired")
	for _, w := range ways {
		ratios := make([]time.Duration, len(w.wall)) // ratio × 1e6, to reuse median
		for i := range w.wall {
			ratios[i] = time.Duration(float64(w.wall[i]) / float64(base.wall[i]) * 1e6)
		}
		fmt.Printf("%-36s %10.2f %8.2f %8.2f\n", w.name, ms(median(w.wall)),
			float64(median(w.wall))/float64(median(base.wall)), float64(median(ratios))/1e6)
	}
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

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
