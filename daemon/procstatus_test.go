package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestReadStatusOfSelf(t *testing.T) {
	st, err := readStatus("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := procStatus{tgid: os.Getpid(), ppid: os.Getppid(), ruid: uint32(os.Getuid()), euid: uint32(os.Geteuid())}
	st.tracer = 0 // a debugger may trace the tests
	if st != want {
		t.Fatalf("status of this process: %+v, want %+v", st, want)
	}
}

// TestStatusOfSelf: a process's status through its pidfd (PIDFD_GET_INFO,
// Linux 6.13 and later) is what /proc/PID/status says, tracer aside; on
// an older kernel statusOf reads /proc itself. A pidfd that names another
// process than the pid given is refused where the kernel can tell.
func TestStatusOfSelf(t *testing.T) {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	self := process{fd: fd, pid: os.Getpid()}
	got, err := statusOf("/proc", self)
	if err != nil {
		t.Fatal(err)
	}
	want, err := readStatus("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got.tracer, want.tracer = 0, 0
	if got != want {
		t.Fatalf("statusOf = %+v, /proc says %+v", got, want)
	}
	var info pidfdInfo
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), pidfdGetInfo, uintptr(unsafe.Pointer(&info))); errno != 0 {
		t.Logf("PIDFD_GET_INFO: %v: statusOf read /proc", errno)
		return
	}
	other := process{fd: fd, pid: os.Getppid()}
	if _, err := statusOf("/proc", other); err == nil || !strings.Contains(err.Error(), "its pidfd names process") {
		t.Fatalf("statusOf of a pidfd and another pid: %v, want a refusal", err)
	}
}

// statusText is the start of a /proc/PID/status with name as its Name
// line and uids as its Uid line.
func statusText(name, uids string) string {
	return "Name:\t" + name + "\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\nPPid:\t17\nTracerPid:\t0\n" +
		"Uid:\t" + uids + "\nGid:\t1000\t1000\t1000\t1000\n"
}

func TestParseStatus(t *testing.T) {
	st, err := parseStatus([]byte(statusText("sh", "1000\t1001\t1002\t1003")))
	if want := (procStatus{tgid: 4242, ppid: 17, ruid: 1000, euid: 1001}); err != nil || st != want {
		t.Fatalf("parseStatus = %+v, %v; want %+v", st, err, want)
	}
	// The kernel escapes a newline in the name: the Uid line that comes
	// first in the text is the name's, and it is not a line.
	st, err = parseStatus([]byte(statusText(`x\nUid:\t0\t0\t0\t0`, "1000\t1000\t1000\t1000")))
	if err != nil || st.ruid != 1000 {
		t.Fatalf("escaped name: %+v, %v; want uid 1000", st, err)
	}
	for _, tt := range []struct{ text, want string }{
		{strings.Replace(statusText("sh", "1000\t1000\t1000\t1000"), "PPid:\t17\n", "", 1), "no PPid line"},
		{statusText("sh", "1000\t1000"), `Uid line "\t1000\t1000": want four uids`},
		{statusText("sh", "-1\t0\t0\t0"), "want four uids"},
		{strings.Replace(statusText("sh", "0\t0\t0\t0"), "Tgid:\t4242", "Tgid:\t+4242", 1), `Tgid line "\t+4242": want one pid`},
		{strings.Replace(statusText("sh", "0\t0\t0\t0"), "TracerPid:\t0", "TracerPid:\t0 1", 1), "want one pid"},
		{"", "no Tgid line"},
	} {
		if _, err := parseStatus([]byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseStatus(%q): %v, want an error with %q", tt.text, err, tt.want)
		}
	}
}

// FuzzParseStatus: parseStatus never panics, and what it accepts has the
// values of the text's first Tgid, PPid, TracerPid and Uid lines.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusText("sh", "1000\t1001\t1002\t1003")))
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStatus(b)
		if err != nil {
			return
		}
		if st.tgid < 0 || st.ppid < 0 || st.tracer < 0 {
			t.Fatalf("parseStatus(%q) = %+v: a negative pid", b, st)
		}
		again, err := parseStatus([]byte(statusText("x", "0\t0\t0\t0") + string(b)))
		if err != nil || again.tgid != 4242 || again.ruid != 0 {
			t.Fatalf("lines after the first of each key changed the status: %+v, %v", again, err)
		}
	})
}

// TestPlaceTracedProcess: a process another tracer holds (a debugger,
// strace -f) cannot be held while it is moved, so it is not moved, and
// the refusal names the tracer, read from the process's status.
func TestPlaceTracedProcess(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), newFakeCgroups(t), SystemUsers{})
	// A grandchild: the daemon holds every process but its own children.
	sh := exec.Command("/bin/sh", "-c", "sleep 30 & echo $!; wait")
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		sh.Wait()
	})
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	traced, stop, detached := make(chan int), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(detached)
		runtime.LockOSThread() // the tracer is this thread
		defer runtime.UnlockOSThread()
		if err := unix.PtraceSeize(pid); err != nil {
			t.Error(err)
			close(traced)
			return
		}
		traced <- unix.Gettid()
		<-stop
		// Let go before the test ends: a tracee killed while traced
		// would stay a zombie no one waits for, and its shell's wait
		// with it.
		if err := release(pid, time.Millisecond); err != nil {
			t.Errorf("let go of process %d: %v", pid, err)
		}
	}()
	tracer := <-traced
	defer func() {
		close(stop)
		<-detached
	}()
	ps, _ := d.srv.rp.poolState("olap")
	p := process{fd: fd, pid: pid}
	err = d.srv.place(placement{peer: p, uid: uint32(os.Getuid()), target: p, rel: peerItself}, ps, "q-traced")
	want := fmt.Sprintf("it is traced by process %d", tracer)
	if !errors.Is(err, ErrCannotHold) || !strings.Contains(err.Error(), want) {
		t.Fatalf("place of a traced process: %v; want ErrCannotHold and %q", err, want)
	}
}
