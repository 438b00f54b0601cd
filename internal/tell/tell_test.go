package tell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/peer"
)

// otherUID is a uid no account has: the tellers run as it.
const otherUID = 60002

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("POOLAGENT_REQUIRE_KERNEL") == "1" {
			t.Fatal("needs root to start tellers as another uid (POOLAGENT_REQUIRE_KERNEL=1 makes this a failure)")
		}
		t.Skip("needs root to start tellers as another uid")
	}
}

// waitRunning waits until uid has n tellers running.
func waitRunning(t *testing.T, tl *Tellers, uid uint32, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for tl.Running(uid) != n {
		if time.Now().After(deadline) {
			t.Fatalf("uid %d has %d tellers running, want %d", uid, tl.Running(uid), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fifo makes a FIFO any user may open, opens its reading end (r) and
// returns a path handle of it (handle, as Open takes), closed at the
// test's end.
func fifo(t *testing.T) (r *os.File, handle int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	handle, err = unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(handle) })
	return r, handle
}

// TestTell: the message arrives in the file the handle names, written
// by a process of the given uid, and the teller is reaped once it
// exited.
func TestTell(t *testing.T) {
	requireRoot(t)
	r, handle := fifo(t)
	tl := New()
	if err := tl.Tell(handle, otherUID, otherUID, "hello\n"); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, tl, otherUID, 0)
	b := make([]byte, 64)
	n, err := r.Read(b)
	if err != nil || string(b[:n]) != "hello\n" {
		t.Fatalf("read %q, %v; want %q", b[:n], err, "hello\n")
	}
}

// TestOpenAppends: Open's handle of a process's standard error (a file
// it writes at an offset of its own) takes a teller's message at the
// file's end, and is a path handle, which has no flush to wait for on
// close.
func TestOpenAppends(t *testing.T) {
	requireRoot(t)
	path := filepath.Join(t.TempDir(), "stderr")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	cmd, stdin, pidfd := startWithStderr(t, "echo before >&2; read x", f)
	for b, _ := os.ReadFile(path); string(b) != "before\n"; b, _ = os.ReadFile(path) {
		time.Sleep(10 * time.Millisecond)
	}
	handle, err := Open("/proc", peer.Process{FD: pidfd, PID: cmd.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(handle)
	if fl, err := unix.FcntlInt(uintptr(handle), unix.F_GETFL, 0); err != nil || fl&unix.O_PATH == 0 {
		t.Fatalf("the handle's flags %#x, %v: want O_PATH", fl, err)
	}
	stdin.Close()
	cmd.Wait()
	tl := New()
	if err := tl.Tell(handle, otherUID, otherUID, "told\n"); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, tl, otherUID, 0)
	if b, _ := os.ReadFile(path); string(b) != "before\ntold\n" {
		t.Fatalf("the file holds %q, want %q", b, "before\ntold\n")
	}
	if _, err := Open("/proc", peer.Process{FD: pidfd, PID: cmd.Process.Pid}); err == nil {
		t.Error("Open of an exited process's standard error: no error")
	}
}

// startWithStderr starts shell script with stderr as its standard error
// and a pipe as its standard input (closing it ends a "read x"), and
// returns it with its pidfd, which the test's cleanup closes.
func startWithStderr(t *testing.T, script string, stderr *os.File) (*exec.Cmd, io.WriteCloser, int) {
	t.Helper()
	pidfd := -1
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(pidfd) })
	return cmd, stdin, pidfd
}

// TestOpenHoldsAPipe: a command's stderr that is a pipe is held open for
// writing, so its reader does not see the pipe end when the command
// exits, and reads the teller's message before the end.
func TestOpenHoldsAPipe(t *testing.T) {
	requireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd, stdin, pidfd := startWithStderr(t, "read x", w)
	w.Close()
	handle, err := Open("/proc", peer.Process{FD: pidfd, PID: cmd.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if fl, err := unix.FcntlInt(uintptr(handle), unix.F_GETFL, 0); err != nil || fl&unix.O_PATH != 0 || fl&unix.O_ACCMODE != unix.O_WRONLY {
		t.Fatalf("the handle's flags %#x, %v: want a pipe open for writing", fl, err)
	}
	stdin.Close()
	cmd.Wait()
	tl := New()
	if err := tl.Tell(handle, otherUID, otherUID, "told\n"); err != nil {
		t.Fatal(err)
	}
	unix.Close(handle)
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "told\n" {
		t.Fatalf("the pipe's reader read %q, %v: want %q, then its end", b, err, "told\n")
	}
}

// TestTellBounded: tellers caught on a full pipe (a write that never
// returns) are at most PerUID per uid; the next Tell is refused with
// ErrBusy at once, another uid's is not; each runs as its uid and gid
// with no supplementary groups, in a session of its own; and once the
// pipe is read the caught tellers exit and are reaped.
func TestTellBounded(t *testing.T) {
	requireRoot(t)
	r, handle := fifo(t)
	// Fill the pipe: every further blocking write waits for a reader.
	w, err := unix.Open("/proc/self/fd/"+strconv.Itoa(handle), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := unix.Write(w, make([]byte, 4096)); err != nil {
			break
		}
	}
	unix.Close(w)
	tl := New()
	for i := range PerUID {
		if err := tl.Tell(handle, otherUID, otherUID, "caught\n"); err != nil {
			t.Fatalf("teller %d: %v", i, err)
		}
	}
	began := time.Now()
	if err := tl.Tell(handle, otherUID, otherUID, "caught\n"); !errors.Is(err, ErrBusy) {
		t.Fatalf("teller %d of a uid: %v, want ErrBusy", PerUID+1, err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("a refused Tell took %v", took)
	}
	if err := tl.Tell(handle, otherUID+1, otherUID+1, "other\n"); err != nil {
		t.Fatalf("another uid's teller: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := tl.Running(otherUID); n != PerUID {
		t.Fatalf("%d tellers of uid %d running on a full pipe, want %d", n, otherUID, PerUID)
	}
	if got := tellerCreds(t); len(got) != 2 || got[otherUID] != PerUID || got[otherUID+1] != 1 {
		t.Errorf("tellers by uid %v, want %d of %d and 1 of %d, each with its gid, no groups, a session of its own", got, PerUID, otherUID, otherUID+1)
	}
	go io.Copy(io.Discard, r)
	waitRunning(t, tl, otherUID, 0)
	waitRunning(t, tl, otherUID+1, 0)
}

// TestTellTooLong: a message over MaxMessageBytes starts no teller.
func TestTellTooLong(t *testing.T) {
	tl := New()
	err := tl.Tell(2, 0, 0, strings.Repeat("x", MaxMessageBytes+1))
	if err == nil || tl.Running(0) != 0 {
		t.Fatalf("Tell of %d bytes: %v, want an error and no teller", MaxMessageBytes+1, err)
	}
}

// tellerCreds counts this process's children that are tellers by uid,
// counting only those whose real and effective uid and gid are the uid,
// with no supplementary groups, each leading a session of its own.
func tellerCreds(t *testing.T) map[uint32]int {
	t.Helper()
	tasks, _ := os.ReadDir("/proc/self/task")
	byUID := map[uint32]int{}
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, pid := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			if string(cmd) != argv0+"\x00" {
				continue
			}
			st, _ := os.ReadFile("/proc/" + pid + "/status")
			stat, _ := os.ReadFile("/proc/" + pid + "/stat")
			var uid, gid [4]uint32
			var groups string
			for line := range strings.Lines(string(st)) {
				k, v, _ := strings.Cut(line, ":")
				switch k {
				case "Uid":
					fmt.Sscan(v, &uid[0], &uid[1], &uid[2], &uid[3])
				case "Gid":
					fmt.Sscan(v, &gid[0], &gid[1], &gid[2], &gid[3])
				case "Groups":
					groups = strings.TrimSpace(v)
				}
			}
			// stat: pid (comm) state ppid pgrp session ...
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if uid != [4]uint32{uid[0], uid[0], uid[0], uid[0]} || gid != uid || groups != "" || len(f) < 4 || f[3] != pid {
				t.Logf("teller %s: uid %v gid %v groups %q stat %q", pid, uid, gid, groups, f)
				continue
			}
			byUID[uid[0]]++
		}
	}
	return byUID
}
