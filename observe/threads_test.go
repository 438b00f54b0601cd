package observe

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseThreadFiles(t *testing.T) {
	if run, err := parseSchedstat([]byte("123456 7890 12\n")); err != nil || run != 123456 {
		t.Errorf("schedstat: %d, %v", run, err)
	}
	if _, err := parseSchedstat([]byte("1 2")); err == nil {
		t.Error("schedstat with two fields accepted")
	}
	for _, c := range []struct {
		in   string
		want byte
	}{
		{"4242 (burn) R 1 4242", 'R'},
		{"4242 (a b) c) S 1", 'S'},
	} {
		if got, err := parseStatState([]byte(c.in)); err != nil || got != c.want {
			t.Errorf("%q: %q, %v", c.in, got, err)
		}
	}
	if _, err := parseStatState([]byte("4242 (sh")); err == nil {
		t.Error("cut-off stat accepted")
	}
}

// TestReadThreadStat reads this process's threads in the real /proc: its
// main thread has run; a thread that is not there reads as
// fs.ErrNotExist; and a file too long for a thread's is refused, naming
// it, not cut off.
func TestReadThreadStat(t *testing.T) {
	st, err := ReadThreadStat("/proc", os.Getpid())
	if err != nil || st.RunNs == 0 {
		t.Fatalf("this process's main thread: %+v, %v", st, err)
	}
	var ended int
	for tid := 1 << 22; ended == 0; tid++ {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(tid))); errors.Is(err, fs.ErrNotExist) {
			ended = tid
		}
	}
	if _, err := ReadThreadStat("/proc", ended); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("thread %d, which is not there: %v, want fs.ErrNotExist", ended, err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "7")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schedstat"), []byte("5000 0 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("7 (sh) R 1 "+strings.Repeat("0 ", threadFileMax)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadThreadStat(root, 7); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "stat")) {
		t.Errorf("a stat longer than %d bytes: %v, want an error naming the file", threadFileMax, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("7 (sh) R 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := ReadThreadStat(root, 7); err != nil || st != (ThreadStat{RunNs: 5000, Runnable: true}) {
		t.Errorf("thread 7: %+v, %v", st, err)
	}
}
