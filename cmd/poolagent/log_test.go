package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"golang.org/x/sys/unix"
)

// TestJournalLogging logs through newLogger into a file, as the daemon
// logs into its stderr, with JOURNAL_STREAM naming that file (as systemd
// names the journal's socket), naming another file, and unset.
func TestJournalLogging(t *testing.T) {
	dir := t.TempDir()
	other, err := os.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	tests := []struct {
		name   string
		stream func(self string) string // JOURNAL_STREAM's value
		want   string                   // the log, as a regexp
	}{
		{"journal", func(self string) string { return self },
			`^<7>level=DEBUG msg="reload refused" reason=x\n<6>level=INFO msg=serving pools=3 pool=olap\n<4>level=WARN msg="systemd notification" pool=olap\n<3>level=ERROR msg="apply failed" pool=olap err="line 1\\nline 2"\n$`},
		{"another stream", func(string) string { return devIno(t, filepath.Join(dir, "other")) },
			`^time=\S+ level=DEBUG msg="reload refused" reason=x\ntime=\S+ level=INFO msg=serving`},
		{"no journal", func(string) string { return "" }, `^time=\S+ level=DEBUG msg="reload refused"`},
		{"garbage", func(string) string { return "journal" }, `^time=\S+ level=DEBUG`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			log := newLogger(f, slog.LevelDebug, tc.stream(devIno(t, path)))
			log.Debug("reload refused", "reason", "x")
			pool := log.With("pool", "olap")
			log.Info("serving", "pools", 3, "pool", "olap")
			pool.Warn("systemd notification")
			pool.Error("apply failed", "err", "line 1\nline 2")
			f.Close()
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tc.want).Match(got) {
				t.Errorf("log:\n%s\nwant it to match %s", got, tc.want)
			}
		})
	}
}

// devIno is JOURNAL_STREAM's value for the file at path.
func devIno(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}
