package observe

import (
	"os"
	"path/filepath"
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

func TestThreadIDs(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cgroup.threads", "")
	write("q1/cgroup.threads", "10\n11\n")
	write("q2/cgroup.threads", "20\n")
	tids, truncated, err := ThreadIDs(root, V2, 10)
	if err != nil || truncated || len(tids) != 3 {
		t.Fatalf("%v %v %v", tids, truncated, err)
	}
	if tids, truncated, err = ThreadIDs(root, V2, 2); err != nil || !truncated || len(tids) != 2 {
		t.Fatalf("limited: %v %v %v", tids, truncated, err)
	}
	write("q3/cgroup.threads", "x\n")
	if _, _, err := ThreadIDs(root, V2, 10); err == nil {
		t.Fatal("a file with a non-number accepted")
	}
}
