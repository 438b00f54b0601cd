package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
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
