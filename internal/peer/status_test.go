package peer

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestReadStatusOfSelf(t *testing.T) {
	st, err := readStatus("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	_, _, suid := unix.Getresuid()
	want := procStatus{tgid: os.Getpid(), ppid: os.Getppid(), ruid: uint32(os.Getuid()), euid: uint32(os.Geteuid()), suid: uint32(suid)}
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
	self := Process{FD: fd, PID: os.Getpid()}
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
	other := Process{FD: fd, PID: os.Getppid()}
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
	if want := (procStatus{tgid: 4242, ppid: 17, ruid: 1000, euid: 1001, suid: 1002}); err != nil || st != want {
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
