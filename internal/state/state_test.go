package state

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
)

func TestAppendSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("X", 3600))
	want := []Change{
		{Seq: 1, Time: at.UTC(), UID: 0, User: "root", DDL: "ALTER RESOURCE POOL olap SET (QUEUE_SIZE=100);"},
		{Seq: 2, Time: at.UTC(), UID: 1001, DDL: "DROP RESOURCE POOL adhoc;"},
	}
	for _, c := range want {
		c.Seq = 99 // Append numbers changes itself
		c.Time = at
		got, err := s.Append(c)
		if err != nil {
			t.Fatal(err)
		}
		if got.Time.Location() != time.UTC {
			t.Errorf("Append kept time zone %v, want UTC", got.Time.Location())
		}
	}
	s.Close()

	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.Changes()
	if len(got) != len(want) {
		t.Fatalf("reopened log has %d changes, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Seq != want[i].Seq || got[i].UID != want[i].UID || got[i].User != want[i].User || got[i].DDL != want[i].DDL {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	info, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %v, want 0600", s.Path(), perm)
	}
}

func TestOpenRefusesSecondHolder(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	// The message names the holder and the remedy.
	if want := fmt.Sprintf("state directory is in use by another process: process %d (", os.Getpid()); !strings.Contains(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), "keeps its run-time changes there; stop that daemon first, or give this one another state directory") {
		t.Errorf("second Open: %v; want it to name process %d and the remedy", err, os.Getpid())
	}
}

func TestOpenRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, tempPrefix+"123")
	if err := os.WriteFile(stale, []byte(`{"format":`), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file still there (err %v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("unrelated file removed: %v", err)
	}
}

func TestAppendFailureKeepsLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(Change{DDL: "DROP RESOURCE POOL a;"}); err != nil {
		t.Fatal(err)
	}
	// A directory that vanished makes the temporary file impossible to
	// create, for root as for anyone.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(Change{DDL: "DROP RESOURCE POOL b;"})
	if err == nil {
		t.Fatal("Append into a removed directory succeeded")
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
		t.Errorf("error %q does not name the file", err)
	}
	if got := s.Changes(); len(got) != 1 || got[0].DDL != "DROP RESOURCE POOL a;" {
		t.Errorf("log after failed Append = %+v, want only the first change", got)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{name: "empty log", in: `{"format":"poolagent-changes/1","changes":[]}`, want: 0},
		{name: "two changes", in: `{"format":"poolagent-changes/1","changes":[
			{"seq":1,"time":"2026-03-01T12:00:00Z","uid":0,"ddl":"DROP RESOURCE POOL a;"},
			{"seq":2,"time":"2026-03-01T12:00:01Z","uid":0,"ddl":"DROP RESOURCE POOL b;"}]}`, want: 2},
		{name: "other format", in: `{"format":"poolagent-changes/2","changes":[]}`, wantErr: `format is not "poolagent-changes/1"`},
		{name: "missing format", in: `{"changes":[]}`, wantErr: `format is not "poolagent-changes/1"`},
		{name: "gap in seq", in: `{"format":"poolagent-changes/1","changes":[
			{"seq":1,"time":"2026-03-01T12:00:00Z","uid":0,"ddl":"DROP RESOURCE POOL a;"},
			{"seq":3,"time":"2026-03-01T12:00:01Z","uid":0,"ddl":"DROP RESOURCE POOL b;"}]}`, wantErr: "change 2 has seq 3"},
		{name: "empty ddl", in: `{"format":"poolagent-changes/1","changes":[{"seq":1,"time":"2026-03-01T12:00:00Z","uid":0,"ddl":"  "}]}`, wantErr: "change 1 has no ddl"},
		{name: "unknown field", in: `{"format":"poolagent-changes/1","changes":[],"extra":1}`, wantErr: "a field the format does not have"},
		{name: "torn", in: `{"format":"poolagent-changes/1","changes":[{"seq":1,`, wantErr: "not a change log"},
		{name: "trailing data", in: `{"format":"poolagent-changes/1","changes":[]} {}`, wantErr: "data after the JSON object"},
		{name: "empty file", in: ``, wantErr: "not a change log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("Parse gave %d changes, want %d", len(got), tc.want)
			}
		})
	}
}

func TestReadNamesFileInError(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Read(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("Read error = %v, want it to start with the path", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"format":"poolagent-changes/1","changes":[{"seq":1,"time":"2026-03-01T12:00:00Z","uid":0,"ddl":"DROP RESOURCE POOL a;"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		changes, err := Parse(data)
		if err != nil {
			return
		}
		for i, c := range changes {
			if c.Seq != uint64(i)+1 || strings.TrimSpace(c.DDL) == "" {
				t.Fatalf("Parse accepted change %d = %+v", i, c)
			}
		}
	})
}

func TestOpenRefusesMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNoDir) {
		t.Fatalf("Open of a missing directory: %v, want ErrNoDir", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused Open created %s", dir)
	}
	s, err := Open(dir, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created %s: %v, %v; want a directory of mode 0700", dir, fi, err)
	}
}

// TestReadRefusesLinksAndNeverEchoes: a change log that is a symbolic
// link, dangling or to another file, or not a regular file, is refused;
// no error quotes what the file holds.
func TestReadRefusesLinksAndNeverEchoes(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("Sroot:$6$hash:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    func(path string) error
		wantErr string
	}{
		{name: "link to another file", make: func(p string) error { return os.Symlink(secret, p) }, wantErr: "a symbolic link, not followed"},
		{name: "dangling link", make: func(p string) error { return os.Symlink(filepath.Join(dir, "nothing"), p) }, wantErr: "a symbolic link, not followed"},
		{name: "named pipe", make: func(p string) error { return syscall.Mkfifo(p, 0o600) }, wantErr: "not a regular file"},
		{name: "other content", make: func(p string) error { return os.WriteFile(p, []byte("Sroot:$6$hash"), 0o600) }, wantErr: "invalid JSON at byte 1"},
		{name: "unknown field", make: func(p string) error {
			return os.WriteFile(p, []byte(`{"format":"poolagent-changes/1","Sroot":"$6$hash"}`), 0o600)
		}, wantErr: "a field the format does not have"},
		{name: "other format", make: func(p string) error {
			return os.WriteFile(p, []byte(`{"format":"Sroot:$6$hash"}`), 0o600)
		}, wantErr: "format is not"},
		{name: "wrong type", make: func(p string) error {
			return os.WriteFile(p, []byte(`{"format":"poolagent-changes/1","changes":[{"seq":"Sroot:$6$hash"}]}`), 0o600)
		}, wantErr: "field changes.seq is not a uint64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := tt.make(path); err != nil {
				t.Fatal(err)
			}
			_, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Read: %v, want an error containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "Sroot") || strings.Contains(err.Error(), "hash") {
				t.Fatalf("error %q quotes the file", err)
			}
		})
	}
}

// otherUID is a uid that is neither the test's nor the daemon's.
const otherUID = 60001

// TestOpenRefusesStateOthersCanWrite: a state directory or change log
// that another user made, or that group or others may write, is refused
// with a message saying why and what to do, and nothing is written in
// it. The first case is the attack: with --state-dir under a
// world-writable directory and --create-state-dir, another user makes the
// directory first and writes a change log granting them everything.
func TestOpenRefusesStateOthersCanWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv(kerneltest.EnvRequire) == "1" {
			t.Fatalf("needs root to make files of another user (%s=1 makes this a failure)", kerneltest.EnvRequire)
		}
		t.Skip("needs root to make files of another user")
	}
	grant := `{"format":"poolagent-changes/1","changes":[{"seq":1,"time":"2026-01-01T00:00:00Z","uid":60001,"ddl":"GRANT ALL ON RESOURCE POOL default TO 'mallory';"}]}`
	tests := []struct {
		name string
		// make makes the state directory dir inside the world-writable
		// (sticky, as /tmp) directory tmp.
		make    func(t *testing.T, tmp, dir string)
		wantErr string
	}{
		{"made by another uid, mode 0777, with a change log 0666", func(t *testing.T, tmp, dir string) {
			asOther(t, tmp, "umask 0 && mkdir "+dir+" && printf '%s' '"+grant+"' >"+dir+"/changes.json")
		}, "state directory " + "DIR is owned by uid 60001, not by uid 0"},
		{"made by another uid, mode 0700", func(t *testing.T, tmp, dir string) {
			asOther(t, tmp, "mkdir -m 0700 "+dir)
		}, "state directory DIR is owned by uid 60001"},
		{"root's, mode 0777", func(t *testing.T, tmp, dir string) { mkdir(t, dir, 0o777) }, "state directory DIR has mode 0777: it may be written by another user (group or others may write it)"},
		{"root's, mode 0770", func(t *testing.T, tmp, dir string) { mkdir(t, dir, 0o770) }, "has mode 0770"},
		{"root's, a change log of mode 0666", func(t *testing.T, tmp, dir string) {
			mkdir(t, dir, 0o700)
			writeFile(t, filepath.Join(dir, FileName), grant, 0o666)
		}, "state file DIR/changes.json has mode 0666"},
		{"root's, a change log of another uid", func(t *testing.T, tmp, dir string) {
			mkdir(t, dir, 0o700)
			writeFile(t, filepath.Join(dir, FileName), grant, 0o600)
			chown(t, filepath.Join(dir, FileName))
		}, "state file DIR/changes.json is owned by uid 60001"},
		{"a link of another uid to root's directory", func(t *testing.T, tmp, dir string) {
			private := filepath.Join(t.TempDir(), "state")
			mkdir(t, private, 0o700)
			asOther(t, tmp, "ln -s "+private+" "+dir)
		}, "state directory DIR is owned by uid 60001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Where the other user can reach it, as /tmp.
			tmp, err := os.MkdirTemp("", "poolagent-state-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(tmp) })
			if err := os.Chmod(tmp, 0o1777); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(tmp, "state")
			tt.make(t, tmp, dir)
			before := listing(t, dir)
			_, err = Open(dir, Options{Create: true})
			want := strings.ReplaceAll(tt.wantErr, "DIR", dir)
			if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v\nwant ErrNotPrivate and %q", err, want)
			}
			if !strings.Contains(err.Error(), "chown") && !strings.Contains(err.Error(), "chmod go-w") {
				t.Errorf("the error does not say what to do: %v", err)
			}
			if after := listing(t, dir); after != before {
				t.Errorf("the refused directory changed:\n%s\nto\n%s", before, after)
			}
		})
	}
	t.Run("root's, modes 0755 and 0644", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		mkdir(t, dir, 0o755)
		writeFile(t, filepath.Join(dir, FileName), grant, 0o644)
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		s.Close()
	})
}

// asOther runs script with sh as otherUID in dir.
func asOther(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s as uid %d: %v\n%s", script, otherUID, err, out)
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
}

// listing is the names, modes and sizes in dir, to tell whether it
// changed.
func listing(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %v %d\n", e.Name(), fi.Mode(), fi.Size())
	}
	return b.String()
}
