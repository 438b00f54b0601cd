package observe

import "testing"

func TestFlockHolder(t *testing.T) {
	locks := `1: POSIX  ADVISORY  WRITE 900 00:1c:112885 0 EOF
2: FLOCK  ADVISORY  WRITE 4242 00:1c:112885 0 EOF
2: -> FLOCK  ADVISORY  WRITE 4343 00:1c:112885 0 EOF
3: FLOCK  ADVISORY  WRITE 77 fe:00:112885 0 EOF
`
	for _, tc := range []struct {
		name         string
		major, minor uint32
		ino          uint64
		want         int
	}{
		{"holder, not the waiter or a POSIX lock", 0, 0x1c, 112885, 4242},
		{"device in hex", 0xfe, 0, 112885, 77},
		{"none", 0, 0x1c, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flockHolder([]byte(locks), tc.major, tc.minor, tc.ino); got != tc.want {
				t.Fatalf("flockHolder = %d, want %d", got, tc.want)
			}
		})
	}
}
