package observe

import (
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
