package admission

import (
	"errors"
	"testing"
	"time"

	"github.com/poolagent/poolagent/planner"
)

func loadModel(t *testing.T, ddl string) *planner.Model {
	t.Helper()
	m, _, err := planner.Load("test.sql", []byte(ddl))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// classifyDDL has the seed's rank conflict (olap1 gets RANK 1000, olap2
// 2000, so olap1 wins for user1), a catch-all classifier ranked last, a classifier whose pool is dropped, one whose pool
// is not granted to its members, and group grants.
const classifyDDL = `
CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=10);
CREATE RESOURCE POOL olap1 WITH (CONCURRENT_QUERY_LIMIT=10);
CREATE RESOURCE POOL olap2 WITH (CONCURRENT_QUERY_LIMIT=10);
CREATE RESOURCE POOL ceo WITH (CONCURRENT_QUERY_LIMIT=10);
CREATE RESOURCE POOL batch WITH (CONCURRENT_QUERY_LIMIT=10);
CREATE RESOURCE POOL gone WITH (CONCURRENT_QUERY_LIMIT=10);
CREATE RESOURCE POOL CLASSIFIER olap1_c WITH (RESOURCE_POOL='olap1', MEMBER_NAME='user1');
CREATE RESOURCE POOL CLASSIFIER olap2_c WITH (RESOURCE_POOL='olap2', MEMBER_NAME='user1');
CREATE RESOURCE POOL CLASSIFIER ceo_c WITH (RESOURCE_POOL='ceo', MEMBER_NAME='ceo', RANK=10);
CREATE RESOURCE POOL CLASSIFIER gone_c WITH (RESOURCE_POOL='gone', MEMBER_NAME='user2', RANK=20);
CREATE RESOURCE POOL CLASSIFIER analysts_c WITH (RESOURCE_POOL='batch', MEMBER_NAME='%analysts', RANK=500);
CREATE RESOURCE POOL CLASSIFIER everyone_olap WITH (RESOURCE_POOL='olap', MEMBER_NAME='all-users@well-known', RANK=90000);
DROP RESOURCE POOL gone;
GRANT USE ON RESOURCE POOL olap TO 'all-users@well-known';
GRANT USE ON RESOURCE POOL olap1, olap2 TO user1;
GRANT USE ON RESOURCE POOL ceo TO ceo;
GRANT USE ON RESOURCE POOL batch TO '%etl';
GRANT ALL ON ` + "`/host`" + ` TO '%wheel';
`

func user(name string, uid uint32, groups ...string) Identity {
	return Identity{UID: uid, GID: uid, User: name, Groups: append([]string{name}, groups...)}
}

func TestClassify(t *testing.T) {
	access := Access{Model: loadModel(t, classifyDDL), AdminGroup: "poolagent"}
	tests := []struct {
		name    string
		id      Identity
		named   string
		want    Placement
		wantErr error
	}{
		{name: "lowest rank wins", id: user("user1", 1001),
			want: Placement{Pool: "olap1", Classifier: "olap1_c"}},
		{name: "everyone through all-users", id: user("user3", 1003),
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "classifier of a dropped pool skipped", id: user("user2", 1002),
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "group member without grant skipped", id: user("ann", 1004, "analysts"),
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "group member granted through another group", id: user("bob", 1005, "analysts", "etl"),
			want: Placement{Pool: "batch", Classifier: "analysts_c"}},
		{name: "no user name", id: Identity{UID: 4242, GID: 4242},
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "named pool with grant", id: user("ceo", 1007), named: "ceo", want: Placement{Pool: "ceo"}},
		{name: "named default needs no grant", id: user("user3", 1003), named: planner.DefaultPool,
			want: Placement{Pool: planner.DefaultPool}},
		{name: "root names any pool", id: Identity{UID: 0, User: "root", Groups: []string{"root"}},
			named: "ceo", want: Placement{Pool: "ceo"}},
		{name: "admin group names any pool", id: user("op", 1006, "poolagent"), named: "batch",
			want: Placement{Pool: "batch"}},
		{name: "admin grant names any pool", id: user("wh", 1008, "wheel"), named: "ceo",
			want: Placement{Pool: "ceo"}},
		{name: "named pool without grant", id: user("user3", 1003), named: "ceo", wantErr: ErrAccessDenied},
		{name: "named pool missing", id: user("user3", 1003), named: "gone", wantErr: ErrUnknownPool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := access.Classify(tt.id, tt.named, "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("placement %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassifyWithoutPoolFile(t *testing.T) {
	got, err := Access{Model: planner.NewModel()}.Classify(user("u", 1000), "", "")
	if err != nil || got != (Placement{Pool: planner.DefaultPool}) {
		t.Fatalf("got %+v, %v; want the default pool", got, err)
	}
}

func TestRefusalMessages(t *testing.T) {
	access := Access{Model: loadModel(t, classifyDDL)}
	id := Identity{UID: 1003, GID: 1003, User: "user3", Groups: []string{"user3", "staff"}}
	nameless := Identity{UID: 4242, GID: 100, Groups: []string{"users"}}
	tests := []struct {
		name  string
		id    Identity
		named string
		want  string
	}{
		{name: "no grant", id: id, named: "ceo", want: `access denied: resource pool "ceo" refused user3 (uid 1003): no grant to use it ` +
			`for the user, their groups (user3, staff) or all-users@well-known; an administrator can run ` +
			`GRANT USE ON RESOURCE POOL ceo TO user3`},
		{name: "no grant, uid without a user entry", id: nameless, named: "ceo", want: `access denied: resource pool "ceo" refused uid 4242: ` +
			`no grant to use it for the user, their groups (users) or all-users@well-known; an administrator can run ` +
			`GRANT USE ON RESOURCE POOL ceo TO '%GROUP'`},
		{name: "unknown pool", id: id, named: "nope", want: `unknown pool: resource pool "nope" does not exist ` +
			`(pools: default, batch, ceo, olap, olap1, olap2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := access.Classify(tt.id, tt.named, ""); err == nil || err.Error() != tt.want {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
		})
	}
}

func TestIsAdmin(t *testing.T) {
	access := Access{Model: loadModel(t, classifyDDL), AdminGroup: "poolagent"}
	tests := []struct {
		name string
		id   Identity
		want bool
	}{
		{name: "root", id: Identity{UID: 0}, want: true},
		{name: "admin group", id: user("a", 1000, "poolagent"), want: true},
		{name: "admin grant to a group", id: user("b", 1001, "wheel"), want: true},
		{name: "plain user", id: user("c", 1002, "staff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := access.IsAdmin(tt.id); got != tt.want {
				t.Errorf("IsAdmin = %v, want %v", got, tt.want)
			}
		})
	}
	if (Access{Model: planner.NewModel()}).IsAdmin(user("poolagent", 1003)) {
		t.Error("an empty AdminGroup made a user named like it admin")
	}
}

func TestLimitsFromModel(t *testing.T) {
	m := loadModel(t, `
CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=10, QUEUE_SIZE=1000,
    DATABASE_LOAD_CPU_THRESHOLD=80, QUERY_CANCEL_AFTER_SECONDS=30);
CREATE RESOURCE POOL zero WITH (CONCURRENT_QUERY_LIMIT=0, QUERY_CANCEL_AFTER_SECONDS=0);
`)
	got := LimitsFromModel(m)
	want := map[string]Limits{
		planner.DefaultPool: UnlimitedLimits(),
		"olap":              {ConcurrentQueryLimit: 10, QueueSize: 1000, LoadCPUThresholdPercent: 80, CancelAfter: 30 * time.Second},
		"zero":              {ConcurrentQueryLimit: 0, QueueSize: Unlimited, LoadCPUThresholdPercent: Unlimited},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d pools, want %d: %+v", len(got), len(want), got)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %+v, want %+v", name, got[name], w)
		}
	}
}

// TestClassifyReject: a matching ACTION='reject' classifier refuses the
// query with YDB's message; HAS_APP_NAME sees the app name the client
// gives; a named pool skips the classifiers, as in YDB.
func TestClassifyReject(t *testing.T) {
	access := Access{Model: loadModel(t, classifyDDL+`
CREATE RESOURCE POOL CLASSIFIER no_curl WITH (ACTION='reject', HAS_APP_NAME='curl', RANK=1);`)}
	_, err := access.Classify(user("user3", 1003), "", "curl")
	var rejected *RejectedError
	if !errors.Is(err, ErrRejected) || !errors.As(err, &rejected) ||
		err.Error() != "Request is rejected by classifier 'no_curl' (rank=1)" {
		t.Fatalf("error %v, want YDB's rejection by no_curl", err)
	}
	if got, err := access.Classify(user("user3", 1003), "", "wget"); err != nil || got.Classifier != "everyone_olap" {
		t.Errorf("another app: %+v, %v; want everyone_olap", got, err)
	}
	if got, err := access.Classify(user("user3", 1003), "olap", "curl"); err != nil || got != (Placement{Pool: "olap"}) {
		t.Errorf("named pool: %+v, %v; want olap without a classifier", got, err)
	}
}
