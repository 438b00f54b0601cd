package cgroupfs

import (
	"encoding/binary"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseProcs(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"1\n22\n333\n", 3, false},
		{"1\nx\n", 0, true},
		{"0\n", 0, true},
		{"-3\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := parseProcs([]byte(tt.in))
			if (err != nil) != tt.wantErr || len(got) != tt.want {
				t.Fatalf("got %v %v, want %d pids err=%v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// FuzzParseProcs: every PID parsed is positive.
func FuzzParseProcs(f *testing.F) {
	for _, s := range []string{"", "1\n22\n", "x", "0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		pids, err := parseProcs(in)
		for _, p := range pids {
			if err == nil && p <= 0 {
				t.Fatalf("%q parsed to pid %d", in, p)
			}
		}
	})
}

// FuzzParseCount: whatever a count file parses to is the file's number,
// non-negative.
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"0", "1024\n", "18446744073709551615", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := parseCount(in)
		if err != nil {
			return
		}
		u, uerr := strconv.ParseUint(strings.TrimSpace(in), 10, 64)
		if v < 0 || uerr != nil || u != uint64(v) {
			t.Fatalf("parseCount(%q) = %d; the number is %d, %v", in, v, u, uerr)
		}
	})
}

// dirent is one linux_dirent64 record of name with type typ, padded to 8
// bytes as the kernel pads them.
func dirent(typ byte, name string) []byte {
	reclen := (direntHeader + len(name) + 1 + 7) &^ 7
	rec := make([]byte, reclen)
	binary.NativeEndian.PutUint64(rec, 1)
	binary.NativeEndian.PutUint16(rec[16:], uint16(reclen))
	rec[18] = typ
	copy(rec[direntHeader:], name)
	return rec
}

// TestAppendDirs keeps the directories of the records, asks the type of
// one the file system did not give, and refuses a record cut short or
// without a name.
func TestAppendDirs(t *testing.T) {
	var b []byte
	for _, r := range []struct {
		typ  byte
		name string
	}{{unix.DT_DIR, "."}, {unix.DT_DIR, ".."}, {unix.DT_REG, "cpu.max"}, {unix.DT_DIR, "q1"},
		{unix.DT_LNK, "link"}, {unix.DT_UNKNOWN, "asked"}, {unix.DT_UNKNOWN, "gone"}, {unix.DT_DIR, strings.Repeat("x", 255)}} {
		b = append(b, dirent(r.typ, r.name)...)
	}
	var asked []string
	dirs, err := appendDirs([]string{"kept"}, b, func(name string) (bool, error) {
		asked = append(asked, name)
		if name == "gone" {
			return false, fs.ErrNotExist
		}
		return true, nil
	})
	if want := []string{"kept", "q1", "asked", strings.Repeat("x", 255)}; err != nil || !slices.Equal(dirs, want) {
		t.Errorf("dirs %q, %v; want %q", dirs, err, want)
	}
	if !slices.Equal(asked, []string{"asked", "gone"}) {
		t.Errorf("asked the type of %q, want those of unknown type", asked)
	}
	for name, bad := range map[string][]byte{
		"cut short":     b[:len(b)-3],
		"header alone":  dirent(unix.DT_DIR, "q1")[:direntHeader],
		"no name":       dirent(unix.DT_DIR, ""),
		"length 0":      append(make([]byte, 16), 0, 0, unix.DT_DIR, 'a', 0, 0, 0, 0),
		"no terminator": append(dirent(unix.DT_DIR, "q1")[:direntHeader], 'a', 'b', 'c', 'd', 'e'),
	} {
		if name == "no terminator" {
			binary.NativeEndian.PutUint16(bad[16:], uint16(len(bad)))
		}
		if _, err := appendDirs(nil, bad, func(string) (bool, error) { return true, nil }); err == nil || !strings.Contains(err.Error(), "directory record at byte") {
			t.Errorf("%s: %v, want an error naming the record", name, err)
		}
	}
}

// FuzzAppendDirs: whatever the records, the names kept are names a
// directory can have, and the records of those names read back the same.
func FuzzAppendDirs(f *testing.F) {
	f.Add(append(dirent(unix.DT_DIR, "q1"), dirent(unix.DT_REG, "cpu.max")...))
	f.Add(dirent(unix.DT_UNKNOWN, "x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		dirs, err := appendDirs(nil, b, func(string) (bool, error) { return true, nil })
		if err != nil {
			return
		}
		var again []byte
		for _, d := range dirs {
			if d == "" || d == "." || d == ".." || strings.ContainsAny(d, "/\x00") {
				t.Fatalf("%q: kept %q", b, d)
			}
			again = append(again, dirent(unix.DT_DIR, d)...)
		}
		if back, err := appendDirs(nil, again, nil); err != nil || !slices.Equal(back, dirs) {
			t.Fatalf("%q: %q read back as %q, %v", b, dirs, back, err)
		}
	})
}
