package peer

import (
	"strings"
	"testing"
)

func TestParsePidfdInfo(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		pid        int
		err        string
	}{
		{"pidfd", "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\t7\n", 4242, ""},
		{"exited, Linux 6.x", "pos:\t0\nPid:\t-1\nNSpid:\t-1\n", 0, "exited"},
		{"exited, older", "pos:\t0\nPid:\t0\n", 0, "exited"},
		{"pipe", "pos:\t0\nflags:\t02000000\nmnt_id:\t14\nino:\t99\n", 0, "not a pidfd"},
		{"garbage", "Pid:\tfour\n", 0, "want a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, err := parsePidfdInfo([]byte(tc.info))
			if tc.err == "" {
				if err != nil || pid != tc.pid {
					t.Fatalf("got %d, %v; want %d", pid, err, tc.pid)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %d, %v; want an error saying %q", pid, err, tc.err)
			}
		})
	}
}
