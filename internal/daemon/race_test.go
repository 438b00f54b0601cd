package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/protocol"
)

// The pid-reuse race, played for real: a client names its child for its
// query, and while the daemon checks and moves it, the client kills and
// reaps the child, and a process of another user gets the child's pid. On
// a busy host that takes luck and a pid cycle; here the daemon's beforeMove
// hook opens the window on demand and the other user's process is made
// with the freed pid at once (clone3 with set_tid, which root may ask for
// in the pid namespace it owns). Without the hold, the other user's
// process is what the daemon moves.

// envTestRacer, set in this test binary's environment, makes it the
// attacking client of TestKernelPlaceRace; the value is the daemon's socket.
const envTestRacer = "POOLAGENT_TEST_RACER"

// victimUID is the other user whose process takes the child's pid.
const victimUID = 65534

// racerAttack is what the racer did when told to attack (line 1 of its
// report); racerEnd what followed (line 2).
type racerAttack struct {
	Child    int
	Reaped   bool   // the racer reaped its killed child
	Victim   int    // pid of the other user's process, 0 if none was made
	CloneErr string // why none was made with the child's pid
}

type racerEnd struct {
	Reply protocol.Reply
	// ReapedAfter: the killed child could be reaped after the daemon
	// answered (the hold ended).
	ReapedAfter bool
}

// TestKernelPlaceRace: the child cannot be reaped while the daemon moves
// it, so no other process can take its pid, and the other user's process
// is never placed.
func TestKernelPlaceRace(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	report := bufio.NewReader(reportR)
	attacks := make(chan racerAttack, 1)
	cfg := Config{beforeMove: func(pid int) {
		// The racer is told to attack now, while the daemon holds the
		// checked child and has not written its pid yet.
		fmt.Fprintln(cmdW, "attack")
		var a racerAttack
		line, err := report.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &a)
		}
		if err != nil {
			t.Errorf("racer's report: %v", err)
		}
		attacks <- a
	}}
	d, cg := kernelDaemon(t, bothModes, cfg, "", rootIdentity)

	racer := exec.Command(exe)
	racer.Env = append(os.Environ(), envTestRacer+"="+d.socket)
	racer.Stderr = os.Stderr
	racer.ExtraFiles = []*os.File{reportW, cmdR}
	if err := racer.Start(); err != nil {
		t.Fatal(err)
	}
	reportW.Close()
	cmdR.Close()
	t.Cleanup(func() {
		cmdW.Close()
		racer.Process.Kill()
		racer.Wait()
		reportR.Close()
	})

	var a racerAttack
	select {
	case a = <-attacks:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon never reached the move")
	}
	if a.Victim > 0 {
		// Ended when the test ends; it is the racer's child until then.
		t.Cleanup(func() { syscall.Kill(a.Victim, syscall.SIGKILL) })
	}
	line, err := report.ReadBytes('\n')
	var end racerEnd
	if err == nil {
		err = json.Unmarshal(line, &end)
	}
	if err != nil {
		t.Fatalf("racer's report after the reply: %v", err)
	}
	t.Logf("attack: %+v; reply: %+v; child reaped after the reply: %v", a, end.Reply, end.ReapedAfter)

	if a.Victim > 0 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", a.Victim))
		if err != nil {
			t.Fatal(err)
		}
		// The test's pool root has a name of its own.
		if strings.Contains(string(b), "/"+filepath.Base(cg.Reader().Root())+"/") {
			t.Errorf("process %d of uid %d took the child's pid %d and was moved into the query cgroup:\n%s", a.Victim, victimUID, a.Child, b)
		}
	}
	if a.Reaped {
		t.Errorf("the client reaped its child %d while the daemon held it", a.Child)
	}
	if a.Victim > 0 {
		t.Errorf("process %d of uid %d was made with the pid %d of the client's child", a.Victim, victimUID, a.Child)
	}
	if !a.Reaped && !end.ReapedAfter {
		t.Errorf("the child %d could not be reaped after the daemon answered: still held", a.Child)
	}
}

// racerMain is the attacking client: it starts a child, has it admitted
// and named, and when the test says "attack" on fd 4, kills and tries to
// reap the child and makes a process of victimUID with the child's pid.
func racerMain(socket string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "racer:", err)
		return 2
	}
	report, cmds := os.NewFile(3, "report"), bufio.NewReader(os.NewFile(4, "commands"))
	pidfd := -1
	child := exec.Command("/bin/sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{PidFD: &pidfd}
	if err := child.Start(); err != nil {
		return fail(err)
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return fail(err)
	}
	dec := json.NewDecoder(conn)
	send := func(r protocol.Request, oob []byte) error {
		b, _ := json.Marshal(r)
		_, _, err := conn.WriteMsgUnix(append(b, '\n'), oob, nil)
		return err
	}
	if err := send(protocol.Request{Op: protocol.OpRun}, nil); err != nil {
		return fail(err)
	}
	var rep protocol.Reply
	if err := dec.Decode(&rep); err != nil || rep.Type != protocol.ReplyAdmitted {
		return fail(fmt.Errorf("want admitted, got %+v, %v", rep, err))
	}
	go func() {
		if _, err := cmds.ReadString('\n'); err != nil {
			return
		}
		a := racerAttack{Child: child.Process.Pid}
		child.Process.Signal(syscall.SIGKILL)
		a.Reaped = reap(a.Child, 200*time.Millisecond)
		// Reaped or not, the other user's process asks for the pid.
		victim, err := spawnWithPID(a.Child, victimUID, []string{"/bin/sleep", "60"})
		if err != nil {
			a.CloneErr = err.Error()
		}
		a.Victim = victim
		json.NewEncoder(report).Encode(a)
	}()
	if err := send(protocol.Request{Op: protocol.OpStart, PID: child.Process.Pid}, unix.UnixRights(pidfd)); err != nil {
		return fail(err)
	}
	var end racerEnd
	if err := dec.Decode(&end.Reply); err != nil {
		return fail(err)
	}
	end.ReapedAfter = reap(child.Process.Pid, 5*time.Second)
	json.NewEncoder(report).Encode(end)
	cmds.ReadString('\n') // until the test ends
	return 0
}

// reap tries to reap process pid without blocking for up to wait, as a
// client racing the daemon would.
func reap(pid int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// cloneArgs is struct clone_args of linux/sched.h up to set_tid_size
// (CLONE_ARGS_SIZE_VER1).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize uint64
}

// spawnWithPID starts argv as uid with the pid pid in this pid namespace
// (clone3 set_tid: root only; EEXIST while the pid is in use).
func spawnWithPID(pid, uid int, argv []string) (int, error) {
	path, err := syscall.BytePtrFromString(argv[0])
	if err != nil {
		return 0, err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return 0, err
	}
	envp, err := syscall.SlicePtrFromStrings([]string{"PATH=/bin:/usr/bin"})
	if err != nil {
		return 0, err
	}
	tid := []int32{int32(pid)}
	args := &cloneArgs{exitSignal: uint64(syscall.SIGCHLD), setTID: uint64(uintptr(unsafe.Pointer(&tid[0]))), setTIDSize: 1}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	// No Go signal handler may run in the child before it execs; the
	// child keeps every signal blocked (SIGKILL still ends it).
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	unix.PthreadSigmask(unix.SIG_SETMASK, &all, &old)
	child, errno := rawCloneExec(args, unsafe.Sizeof(*args), path, &argvp[0], &envp[0], uintptr(uid))
	unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	runtime.KeepAlive(tid)
	if errno != 0 {
		return 0, fmt.Errorf("clone3 with set_tid %d: %w", pid, errno)
	}
	return int(child), nil
}

// rawCloneExec is fork and exec in one function that, in the child, makes
// only raw system calls: the child drops to uid and execs path.
//
//go:norace
//go:nosplit
func rawCloneExec(args *cloneArgs, size uintptr, path *byte, argv, envv **byte, uid uintptr) (uintptr, syscall.Errno) {
	r, _, e := syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(args)), size, 0)
	if e != 0 || r != 0 {
		return r, e
	}
	syscall.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0)
	syscall.RawSyscall(unix.SYS_SETRESGID, uid, uid, uid)
	syscall.RawSyscall(unix.SYS_SETRESUID, uid, uid, uid)
	syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(argv)), uintptr(unsafe.Pointer(envv)))
	syscall.RawSyscall(unix.SYS_EXIT_GROUP, 127, 0, 0)
	return 0, 0
}
