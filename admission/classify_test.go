package admission

import (
	"errors"
	"testing"
)

func TestClassify(t *testing.T) {
	rules := Rules{
		Pools: []string{DefaultPool, "olap", "olap1", "olap2", "ceo", "batch"},
		Classifiers: []Classifier{
			// Listed out of rank order on purpose.
			{Name: "everyone_olap", Pool: "olap", Member: AllUsers, Rank: 9000},
			{Name: "olap2_c", Pool: "olap2", Member: "user1", Rank: 2000},
			{Name: "olap1_c", Pool: "olap1", Member: "user1", Rank: 1000},
			{Name: "ceo_c", Pool: "ceo", Member: "ceo", Rank: 10},
			{Name: "gone_c", Pool: "dropped", Member: "user2", Rank: 20},
			{Name: "analysts_c", Pool: "batch", Member: "analysts", Rank: 500},
		},
		Users: map[string][]string{
			"olap":  {AllUsers},
			"olap1": {"user1"},
			"olap2": {"user1"},
			"ceo":   {"ceo"},
			"batch": {"etl"},
		},
		Admins: []string{"wheel"},
	}
	user := func(name string, uid uint32, groups ...string) Identity {
		return Identity{UID: uid, GID: uid, User: name, Groups: append([]string{name}, groups...)}
	}
	tests := []struct {
		name    string
		id      Identity
		named   string
		want    Placement
		wantErr error
	}{
		{name: "lowest rank wins", id: user("user1", 1001),
			want: Placement{Pool: "olap1", Classifier: "olap1_c"}},
		{name: "user matches through all-users", id: user("user3", 1003),
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "missing pool skipped", id: user("user2", 1002),
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "group member without grant skipped", id: user("ann", 1004, "analysts"),
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
		{name: "group member with grant through another group", id: user("bob", 1005, "analysts", "etl"),
			want: Placement{Pool: "batch", Classifier: "analysts_c"}},
		{name: "root may use every pool", id: Identity{UID: 0, User: "root", Groups: []string{"root"}},
			named: "ceo", want: Placement{Pool: "ceo"}},
		{name: "admin group may use every pool", id: user("op", 1006, "wheel"),
			named: "batch", want: Placement{Pool: "batch"}},
		{name: "named pool with grant", id: user("ceo", 1007), named: "ceo", want: Placement{Pool: "ceo"}},
		{name: "named default needs no grant", id: user("user3", 1003), named: DefaultPool,
			want: Placement{Pool: DefaultPool}},
		{name: "named pool without grant", id: user("user3", 1003), named: "ceo", wantErr: ErrAccessDenied},
		{name: "named pool missing", id: user("user3", 1003), named: "nope", wantErr: ErrUnknownPool},
		{name: "no user name", id: Identity{UID: 4242, GID: 4242},
			want: Placement{Pool: "olap", Classifier: "everyone_olap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rules.Classify(tt.id, tt.named)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("placement %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassifyNoClassifiers(t *testing.T) {
	got, err := Rules{Pools: []string{DefaultPool}}.Classify(Identity{UID: 1000, User: "u"}, "")
	if err != nil || got != (Placement{Pool: DefaultPool}) {
		t.Fatalf("got %+v, %v; want the default pool", got, err)
	}
}

func TestAccessDeniedMessage(t *testing.T) {
	rules := Rules{Pools: []string{DefaultPool, "ceo"}, Users: map[string][]string{"ceo": {"ceo"}}}
	id := Identity{UID: 1003, GID: 1003, User: "user3", Groups: []string{"user3", "staff"}}
	_, err := rules.Classify(id, "ceo")
	want := `access denied: resource pool "ceo" refused user3 (uid 1003): no grant to use it for the user, ` +
		`their groups (user3, staff) or all-users@well-known; an administrator can grant it`
	if err == nil || err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestIsAdmin(t *testing.T) {
	rules := Rules{Admins: []string{"poolagent-admin"}}
	tests := []struct {
		name string
		id   Identity
		want bool
	}{
		{name: "root", id: Identity{UID: 0}, want: true},
		{name: "admin group", id: Identity{UID: 1000, User: "a", Groups: []string{"a", "poolagent-admin"}}, want: true},
		{name: "plain user", id: Identity{UID: 1000, User: "a", Groups: []string{"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.IsAdmin(tt.id); got != tt.want {
				t.Errorf("IsAdmin = %v, want %v", got, tt.want)
			}
		})
	}
}
