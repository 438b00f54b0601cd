package compare

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseWorkerArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want WorkerSpec
		err  string // part of the error; "" for none
	}{
		{name: "need and threads", args: []string{"250000", "2"}, want: WorkerSpec{NeedUsec: 250000, Threads: 2}},
		{name: "zero need", args: []string{"0", "1"}, want: WorkerSpec{Threads: 1}},
		{name: "pinned", args: []string{"1000", "1", "0-2,1,5"}, want: WorkerSpec{NeedUsec: 1000, Threads: 1, CPUs: []int{0, 1, 2, 5}}},
		{name: "no threads", args: []string{"1000"}, err: "want NEED_USEC THREADS [CPU,CPU...]"},
		{name: "too many", args: []string{"1000", "1", "0", "x"}, err: "want NEED_USEC THREADS [CPU,CPU...]"},
		{name: "negative need", args: []string{"-1", "1"}, err: `worker need "-1": want microseconds, 0 or more`},
		{name: "need with unit", args: []string{"10ms", "1"}, err: `worker need "10ms"`},
		{name: "zero threads", args: []string{"1000", "0"}, err: `worker threads "0": want 1 or more`},
		{name: "cpu list garbage", args: []string{"1000", "1", "0,x"}, err: `worker cpus "0,x" is not a CPU list (CPU list "0,x", byte 2: "x" is not a CPU number) (want CPU numbers 0..1023`},
		{name: "cpu beyond the affinity mask", args: []string{"1000", "1", "1024"}, err: `worker cpus "1024" has CPU 1024 (want CPU numbers 0..1023`},
		{name: "empty cpu list", args: []string{"1000", "1", ""}, err: `worker cpus ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWorkerArgs(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseWorkerArgs(%q) = %+v, %v; want an error containing %q", tc.args, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseWorkerArgs(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
			}
			// Args is its inverse: the runner renders what the worker parses.
			again, err := ParseWorkerArgs(got.Args())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("ParseWorkerArgs(%q) = %+v, %v; want %+v back", got.Args(), again, err, got)
			}
		})
	}
}

// FuzzParseWorkerArgs holds the worker's argument parser to never panic,
// to accept only what it can render back (Args) and to parse that again
// to the same spec.
func FuzzParseWorkerArgs(f *testing.F) {
	f.Add("250000", "2", "")
	f.Add("1000", "1", "0-3,6")
	f.Fuzz(func(t *testing.T, need, threads, cpus string) {
		args := []string{need, threads}
		if cpus != "" {
			args = append(args, cpus)
		}
		s, err := ParseWorkerArgs(args)
		if err != nil {
			return
		}
		if s.NeedUsec < 0 || s.Threads < 1 || len(s.CPUs) > cpuSetSize {
			t.Fatalf("ParseWorkerArgs(%q) = %+v: out of range", args, s)
		}
		again, err := ParseWorkerArgs(s.Args())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("ParseWorkerArgs(%q) = %+v, %v; want %+v back", s.Args(), again, err, s)
		}
	})
}
