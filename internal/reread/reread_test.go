package reread

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// counting returns Files below dir that count their opens.
func counting(t *testing.T, dir string, max int) (*Files, *int) {
	t.Helper()
	opens := 0
	f := New(dir, func(name string, flags int) (int, error) {
		opens++
		return unix.Open(filepath.Join(dir, name), flags, 0)
	}, max)
	t.Cleanup(func() { f.Close() })
	return f, &opens
}

func write(t *testing.T, name, s string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, f *Files, name, want string) {
	t.Helper()
	b, err := f.Read(name)
	if err != nil || string(b) != want {
		t.Fatalf("Read(%s) = %q, %v; want %q", name, b, err, want)
	}
}

// A file is kept from its second read on, and a kept file reads what it
// holds now, also when it grew past one read's buffer.
func TestKeptFromSecondRead(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "cpu.stat")
	f, opens := counting(t, dir, 8)
	write(t, name, "usage_usec 1\n")
	read(t, f, "cpu.stat", "usage_usec 1\n")
	if f.kept() != 0 || *opens != 1 {
		t.Fatalf("after one read: %d kept, %d opens; want 0 and 1", f.kept(), *opens)
	}
	read(t, f, "cpu.stat", "usage_usec 1\n")
	if f.kept() != 1 || *opens != 2 {
		t.Fatalf("after two reads: %d kept, %d opens; want 1 and 2", f.kept(), *opens)
	}
	write(t, name, "usage_usec 22\n")
	read(t, f, "cpu.stat", "usage_usec 22\n")
	long := strings.Repeat("nr_periods 12345\n", 200)
	write(t, name, long)
	read(t, f, "cpu.stat", long)
	if *opens != 2 {
		t.Errorf("a kept file was opened again: %d opens, want 2", *opens)
	}
}

// A missing file is an error naming its path that wraps fs.ErrNotExist,
// and is not kept.
func TestMissing(t *testing.T) {
	dir := t.TempDir()
	f, _ := counting(t, dir, 8)
	for range 2 {
		_, err := f.Read("nothing")
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != dir+"/nothing" {
			t.Fatalf("Read(nothing) = %v; want a path error for %s wrapping fs.ErrNotExist", err, dir+"/nothing")
		}
	}
	if f.kept() != 0 {
		t.Errorf("%d kept after failed reads, want 0", f.kept())
	}
}

// No more than max files are kept; the others are read afresh each time.
func TestMax(t *testing.T) {
	dir := t.TempDir()
	f, opens := counting(t, dir, 1)
	for _, n := range []string{"a", "b"} {
		write(t, filepath.Join(dir, n), n)
	}
	for range 3 {
		read(t, f, "a", "a")
		read(t, f, "b", "b")
	}
	if f.kept() != 1 || *opens != 5 {
		t.Errorf("%d kept, %d opens; want 1 kept (a, from its second read) and 5 opens (a twice, b three times)", f.kept(), *opens)
	}
}

// A file not read for a whole Idle is closed at the next sweep; one read
// in between stays.
func TestIdleClosed(t *testing.T) {
	dir := t.TempDir()
	f, opens := counting(t, dir, 8)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	for _, n := range []string{"a", "b"} {
		write(t, filepath.Join(dir, n), n)
		read(t, f, n, n)
		read(t, f, n, n)
	}
	if f.kept() != 2 {
		t.Fatalf("%d kept, want 2", f.kept())
	}
	// The first read swept at time 1000: the next sweep is an Idle on.
	now = now.Add(Idle)
	read(t, f, "a", "a") // sweeps: both were read since the last; a is read again
	now = now.Add(Idle)
	read(t, f, "a", "a") // sweeps: b was not read since the last
	if f.kept() != 1 {
		t.Fatalf("%d kept after b went unread for an Idle, want 1 (a)", f.kept())
	}
	before := *opens
	read(t, f, "a", "a")
	read(t, f, "b", "b")
	if *opens != before+1 {
		t.Errorf("%d opens for a kept a and a closed b, want 1", *opens-before)
	}
}

// A kept /proc file of a process that ended refuses the read (ESRCH): it
// is dropped, and the read answers as a fresh open does.
func TestEndedProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	f, opens := counting(t, "/proc", 8)
	name := strconv.Itoa(cmd.Process.Pid) + "/stat"
	for range 2 {
		if b, err := f.Read(name); err != nil || !strings.HasPrefix(string(b), strconv.Itoa(cmd.Process.Pid)+" (sleep)") {
			t.Fatalf("Read(%s) = %q, %v; want the sleeper's stat", name, b, err)
		}
	}
	if f.kept() != 1 {
		t.Fatalf("%d kept, want 1", f.kept())
	}
	cmd.Process.Kill()
	cmd.Wait()
	_, err := f.Read(name)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(%s) of a reaped process = %v; want fs.ErrNotExist, as from a fresh open", name, err)
	}
	if f.kept() != 0 || *opens != 3 {
		t.Errorf("after the process ended: %d kept, %d opens; want 0 and 3", f.kept(), *opens)
	}
}

// Reads from several goroutines while files are swept and closed return
// the files' contents (run with -race).
func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	f := New(dir, func(name string, flags int) (int, error) {
		return unix.Open(filepath.Join(dir, name), flags, 0)
	}, 2)
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	now := time.Unix(0, 0)
	f.now = func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(Idle / 3); return now }
	names := []string{"a", "b", "c"}
	for _, n := range names {
		write(t, filepath.Join(dir, n), n+n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				n := names[(g+i)%len(names)]
				if b, err := f.Read(n); err != nil || string(b) != n+n {
					errs <- errors.Join(err, errors.New("read "+n+": "+string(b)))
					return
				}
				if i%50 == 0 {
					f.Close()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A process short of descriptors (a fresh one numbered at or above high,
// half the limit) keeps none: the kept ones are closed, and no other is
// kept until descriptors are low again.
func TestShortOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	f, _ := counting(t, dir, 8)
	for _, n := range []string{"a", "b", "c"} {
		write(t, filepath.Join(dir, n), n)
	}
	for _, n := range []string{"a", "b", "a", "b"} {
		read(t, f, n, n)
	}
	if f.kept() != 2 {
		t.Fatalf("%d kept, want 2", f.kept())
	}
	high := f.high
	f.high = 0 // every descriptor is now "high"
	read(t, f, "c", "c")
	if f.kept() != 0 {
		t.Fatalf("%d kept after a fresh descriptor at the high mark, want 0", f.kept())
	}
	read(t, f, "c", "c")
	read(t, f, "a", "a")
	read(t, f, "a", "a")
	if f.kept() != 0 {
		t.Fatalf("%d kept while short of descriptors, want 0", f.kept())
	}
	f.high = high
	read(t, f, "a", "a")
	read(t, f, "a", "a")
	if f.kept() != 1 {
		t.Errorf("%d kept once descriptors are low again, want 1", f.kept())
	}
}
