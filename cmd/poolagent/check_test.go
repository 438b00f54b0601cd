package main

import "testing"

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		stdout string
		err    string
		golden string // expected stderr
	}{
		{"valid file", "seed.sql", "testdata/pools/seed.sql: ok: 2 pools, 1 classifier, 3 grants\n", "", "seed.check.stderr"},
		{"valid with warnings", "seed_ranks.sql", "testdata/pools/seed_ranks.sql: ok: 1 pool, 2 classifiers, 0 grants\n", "", "seed_ranks.check.stderr"},
		{"every problem, file refused", "bad.sql", "", "../../testdata/pools/bad.sql: 8 errors, file refused", "bad.check.stderr"},
		{"syntax errors", "bad_syntax.sql", "", "../../testdata/pools/bad_syntax.sql: 3 errors, file refused", "bad_syntax.check.stderr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, "check", "--pools", poolsDir+tc.file)
			if got := errText(err); got != tc.err {
				t.Errorf("err %q, want %q", got, tc.err)
			}
			checkGolden(t, tc.golden, stderr)
			if got := replaceTestdata(stdout); got != tc.stdout {
				t.Errorf("stdout %q, want %q", got, tc.stdout)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
