package state

import (
	"strings"
	"testing"
	"time"
)

func TestEffective(t *testing.T) {
	const poolFile = "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=10, QUEUE_SIZE=1000);\n"
	tests := []struct {
		name    string
		changes []string
		check   func(t *testing.T, queueSize int64, exists bool)
		wantErr string
	}{
		{
			name: "no changes is the pool file",
			check: func(t *testing.T, q int64, ok bool) {
				if !ok || q != 1000 {
					t.Errorf("olap QUEUE_SIZE %d (exists %v), want 1000", q, ok)
				}
			},
		},
		{
			name:    "changes apply in order",
			changes: []string{"ALTER RESOURCE POOL olap SET (QUEUE_SIZE=100);", "ALTER RESOURCE POOL olap SET (QUEUE_SIZE=7);"},
			check: func(t *testing.T, q int64, ok bool) {
				if !ok || q != 7 {
					t.Errorf("olap QUEUE_SIZE %d, want 7 (the last change)", q)
				}
			},
		},
		{
			name:    "drop",
			changes: []string{"DROP RESOURCE POOL olap;"},
			check: func(t *testing.T, _ int64, ok bool) {
				if ok {
					t.Error("olap still exists after a logged DROP")
				}
			},
		},
		{
			name:    "change that no longer applies",
			changes: []string{"DROP RESOURCE POOL olap;", "ALTER RESOURCE POOL olap SET (QUEUE_SIZE=1);"},
			wantErr: "run-time change 2 (uid 0, 2026-03-01 12:00:00Z) no longer applies after pools.sql",
		},
		{
			name:    "position inside the log",
			changes: []string{"ALTER RESOURCE POOL olap SET (QUEUE_SIZ=1);"},
			wantErr: "/var/lib/poolagent/changes.json#1:1:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var changes []Change
			for i, ddl := range tc.changes {
				changes = append(changes, Change{Seq: uint64(i) + 1, Time: mustTime(t), DDL: ddl})
			}
			m, _, err := Effective("pools.sql", []byte(poolFile), "/var/lib/poolagent/changes.json", changes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, ok := m.Pool("olap")
			tc.check(t, p.QueueSize, ok)
		})
	}
}

func mustTime(t *testing.T) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, "2026-03-01T12:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	return at
}
