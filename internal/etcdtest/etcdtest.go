// Package etcdtest runs real etcd clusters for tests: each member is a
// separate etcd-member process (an embedded go.etcd.io/etcd/server/v3) on
// loopback, so a test can kill and restart members. The member binary is
// built once per test binary with `go build`, or taken from
// $POOLAGENT_ETCD_MEMBER when scripts/test.sh has built it already.
package etcdtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MemberEnv names the environment variable holding a prebuilt etcd-member.
const MemberEnv = "POOLAGENT_ETCD_MEMBER"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the etcd-member command, building it on first
// use.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(MemberEnv); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "etcd-member-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "etcd-member")
		cmd := exec.Command("go", "build", "-o", buildPath, "github.com/poolagent/poolagent/internal/etcdtest/etcd-member")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build etcd-member: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// RemoveBuilt removes the etcd-member Binary built, if it built one: for
// TestMain, once the tests are done.
func RemoveBuilt() {
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
}

// Member is one etcd member process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	dir       string
	cluster   string
	cmd       *exec.Cmd
	done      chan struct{}
}

// Cluster is a running etcd cluster of separate member processes.
type Cluster struct {
	bin     string
	noFsync bool
	Members []*Member
}

// Options tune a cluster.
type Options struct {
	// Members is the number of members; 1 when 0.
	Members int
	// Fsync keeps the members' log fsync on, as in production; off by
	// default, since most tests measure nothing.
	Fsync bool
}

// Start starts a cluster and waits until every member is ready. The
// members are killed when the test ends.
func Start(t testing.TB, opt Options) *Cluster {
	t.Helper()
	c, err := New(Binary(t), t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// New starts a cluster of bin (see Binary) with its data under dir and
// waits until every member is ready; Stop ends it. For a cluster shared by
// the tests of a package, from TestMain.
func New(bin, dir string, opt Options) (*Cluster, error) {
	n := opt.Members
	if n == 0 {
		n = 1
	}
	c := &Cluster{bin: bin, noFsync: !opt.Fsync}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dir:       filepath.Join(dir, fmt.Sprintf("m%d", i)),
		}
		c.Members = append(c.Members, m)
		names = append(names, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.cluster = strings.Join(names, ",")
	}
	ready := make(chan error, n)
	for _, m := range c.Members {
		go func() { ready <- c.start(m, "new") }()
	}
	for range n {
		if err := <-ready; err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// Stop kills every member.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		c.Kill(m)
	}
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

func (c *Cluster) start(m *Member, state string) error {
	args := []string{
		"-name", m.Name, "-data-dir", m.dir,
		"-client-url", m.ClientURL, "-peer-url", m.PeerURL,
		"-initial-cluster", m.cluster, "-state", state,
	}
	if c.noFsync {
		args = append(args, "-unsafe-no-fsync")
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stderr = os.Stderr
	// A member dies with the test binary, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd member %s: %w", m.Name, err)
	}
	m.cmd = cmd
	m.done = make(chan struct{})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		for s.Scan() {
		}
	}()
	go func() {
		cmd.Wait()
		close(m.done)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			return fmt.Errorf("etcd member %s: not ready (said %q)", m.Name, l)
		}
		return nil
	case <-time.After(90 * time.Second):
		c.Kill(m)
		return fmt.Errorf("etcd member %s: not ready after 90 s", m.Name)
	}
}

// PID is the member's process id; 0 while it is not running.
func (m *Member) PID() int {
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill kills a member at once (SIGKILL) and waits for it to exit. Killing
// a member that is not running does nothing.
func (c *Cluster) Kill(m *Member) {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	m.cmd = nil
}

// Restart starts a killed member again with its data.
func (c *Cluster) Restart(m *Member) error {
	return c.start(m, "existing")
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
