package kerneltest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/burn"
)

// envBurner, when set in a test binary's environment, makes [Main] run a
// burner instead of the tests; its value is the encoded [Burn].
const envBurner = "POOLAGENT_KERNELTEST_BURNER"

// Clock is what a burner measures its work by.
type Clock int

const (
	// Wall burns until For of wall time has passed since the go signal,
	// however much of it the quota allowed to run: the shape of "a
	// busy loop for 2 s".
	Wall Clock = iota
	// CPUTime burns until the burner's own CPU time (CLOCK_PROCESS_CPUTIME_ID)
	// has grown by For: a fixed amount of work whose wall time the quota
	// stretches.
	CPUTime
)

// Burn describes one burner process: a thread in a busy loop, or
// Threads of them.
type Burn struct {
	For   time.Duration
	Clock Clock
	// Pin pins every thread of the burner to CPU, so throttled time is
	// not summed over several CPUs.
	Pin bool
	CPU int
	// Threads is how many threads burn at once, each For on its own
	// clock (CPUTime: its own CPU time, CLOCK_THREAD_CPUTIME_ID); 0 is
	// one.
	Threads int
}

func (b Burn) encode() string {
	pin := -1
	if b.Pin {
		pin = b.CPU
	}
	return fmt.Sprintf("%s %d %d %d", b.For, b.Clock, pin, b.threads())
}

// threads is Threads, at least 1.
func (b Burn) threads() int { return max(b.Threads, 1) }

func decodeBurn(s string) (Burn, error) {
	var (
		d       string
		clock   Clock
		pin     int
		threads int
	)
	if _, err := fmt.Sscanf(s, "%s %d %d %d", &d, &clock, &pin, &threads); err != nil {
		return Burn{}, fmt.Errorf("%s=%q: %w", envBurner, s, err)
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		return Burn{}, fmt.Errorf("%s=%q: %w", envBurner, s, err)
	}
	if threads < 1 || threads > 64 {
		return Burn{}, fmt.Errorf("%s=%q: %d threads (accepted: 1..64)", envBurner, s, threads)
	}
	b := Burn{For: dur, Clock: clock}
	if threads > 1 {
		b.Threads = threads
	}
	if pin >= 0 {
		b.Pin, b.CPU = true, pin
	}
	return b, nil
}

// Main is a test package's TestMain body for packages that start burners:
//
//	func TestMain(m *testing.M) { kerneltest.Main(m) }
//
// In a burner child it burns and exits; otherwise it runs the tests.
func Main(m *testing.M) {
	if s := os.Getenv(envBurner); s != "" {
		if err := runBurner(s); err != nil {
			fmt.Fprintln(os.Stderr, "burner:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runBurner is the child's side: pin, say ready on fd 3, wait for one byte
// on stdin (EOF: exit without burning), pin again, then burn.
func runBurner(spec string) error {
	b, err := decodeBurn(spec)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if b.Pin {
		if err := burn.Pin([]int{b.CPU}); err != nil {
			return err
		}
	}
	ready := os.NewFile(3, "ready")
	if _, err := ready.Write([]byte{'R'}); err != nil {
		return fmt.Errorf("signal ready: %w", err)
	}
	ready.Close()
	var buf [1]byte
	if n, _ := os.Stdin.Read(buf[:]); n == 0 {
		return nil
	}
	// NOTE: the test moves the burner between ready and go, which resets
	// its affinity to the cgroup's CPUs where the cpuset controller is on
	// (cpuset_attach; Linux 6.2 and later keep the mask a process asked
	// for), so the pin is made again.
	if b.Pin {
		if err := burn.Pin([]int{b.CPU}); err != nil {
			return err
		}
	}
	burnFor(b)
	return nil
}

// burnFor runs the busy loop until b.For has passed on b's clock, on
// b.threads() threads at once.
func burnFor(b Burn) {
	if b.threads() == 1 {
		burnThread(b, burn.ProcessCPU)
		return
	}
	var wg sync.WaitGroup
	for range b.threads() - 1 {
		wg.Go(func() {
			runtime.LockOSThread()
			burnThread(b, burn.ThreadCPU)
		})
	}
	burnThread(b, burn.ThreadCPU)
	wg.Wait()
}

// burnThread runs the busy loop on the calling thread until b.For has
// passed on b's clock, CPU time read from cpu.
func burnThread(b Burn, cpu func() time.Duration) {
	done := func() func() bool {
		if b.Clock == CPUTime {
			start := cpu()
			return func() bool { return cpu()-start >= b.For }
		}
		end := time.Now().Add(b.For)
		return func() bool { return !time.Now().Before(end) }
	}()
	burn.Until(done, 10000)
}

// Burner is a started burner child. It waits for [Burner.Go] so the test can
// move it into a cgroup first: its runtime start-up then runs unthrottled.
// An idle burner (never told to go) is a resident process that uses no CPU.
type Burner struct {
	// PID is the child's process ID, to write into cgroup.procs.
	PID int

	cmd    *exec.Cmd
	goPipe io.WriteCloser
	stderr *bytes.Buffer

	once sync.Once
	err  error
}

var (
	burnersMu sync.Mutex
	burners   = map[int]*Burner{}
)

func burnerByPID(pid int) *Burner {
	burnersMu.Lock()
	defer burnersMu.Unlock()
	return burners[pid]
}

// StartBurner starts the test binary again as a burner (the package's
// TestMain must call [Main]) and returns once it has signalled ready. The
// child is killed by PID in t.Cleanup if it is still running.
func StartBurner(t testing.TB, b Burn) *Burner {
	t.Helper()
	return StartBurnerVia(t, b)
}

// StartBurnerVia is StartBurner through a command: via's words, then the
// test binary and its arguments (e.g. `poolagent run --pool P --`, which
// execs it in place, so the burner's PID is the command's). The command
// keeps the burner's stdin and file descriptor 3.
func StartBurnerVia(t testing.TB, b Burn, via ...string) *Burner {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("start burner: %v", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatalf("start burner: %v", err)
	}
	defer readyR.Close()
	args := append(slices.Clone(via), self, "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), envBurner+"="+b.encode(), fmt.Sprintf("GOMAXPROCS=%d", b.threads()))
	cmd.ExtraFiles = []*os.File{readyW}
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	goPipe, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("start burner: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start burner %s: %v", filepath.Base(self), err)
	}
	readyW.Close()
	bn := &Burner{PID: cmd.Process.Pid, cmd: cmd, goPipe: goPipe, stderr: stderr}
	burnersMu.Lock()
	burners[bn.PID] = bn
	burnersMu.Unlock()
	t.Cleanup(bn.kill)

	got := make(chan error, 1)
	go func() {
		var buf [1]byte
		_, err := readyR.Read(buf[:])
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			bn.kill()
			t.Fatalf("burner pid %d did not signal ready: %v; stderr: %s", bn.PID, err, strings.TrimSpace(stderr.String()))
		}
	case <-time.After(30 * time.Second):
		bn.kill()
		t.Fatalf("burner pid %d not ready after 30s", bn.PID)
	}
	return bn
}

// Go tells the burner to start burning.
func (b *Burner) Go() error {
	if _, err := b.goPipe.Write([]byte{1}); err != nil {
		return fmt.Errorf("burner pid %d: go: %w", b.PID, err)
	}
	return nil
}

// Wait waits for the burner to finish and returns the CPU time it used
// (user + system).
func (b *Burner) Wait() (time.Duration, error) {
	b.once.Do(func() {
		b.err = b.cmd.Wait()
		b.forget()
	})
	if b.err != nil {
		return 0, fmt.Errorf("burner pid %d: %w; stderr: %s", b.PID, b.err, strings.TrimSpace(b.stderr.String()))
	}
	st := b.cmd.ProcessState
	return st.UserTime() + st.SystemTime(), nil
}

// kill ends the burner by its PID and reaps it; a no-op once it has exited.
func (b *Burner) kill() {
	b.once.Do(func() {
		b.cmd.Process.Kill()
		b.err = b.cmd.Wait()
		b.forget()
	})
}

func (b *Burner) forget() {
	b.goPipe.Close()
	burnersMu.Lock()
	delete(burners, b.PID)
	burnersMu.Unlock()
}
