package planner

import (
	"strings"
	"testing"
)

// The examples of YDB's CREATE RESOURCE POOL CLASSIFIER page, unchanged.
const (
	ydbClUser = `CREATE RESOURCE POOL CLASSIFIER cl_user WITH (
    RANK=100,
    RESOURCE_POOL='olap',
    MEMBER_NAME='user1@ldap'
);`
	ydbClArchive = `CREATE RESOURCE POOL CLASSIFIER cl_archive WITH (
    RANK=700,
    RESOURCE_POOL='pool_archive',
    HAS_PATH='/Root/db/archive/*'
);`
	ydbClAdhocUI = `CREATE RESOURCE POOL CLASSIFIER cl_adhoc_ui WITH (
    RANK=200,
    RESOURCE_POOL='pool_adhoc',
    HAS_APP_NAME='ydb-ui'
);`
	ydbClFullscanReject = `CREATE RESOURCE POOL CLASSIFIER cl_fullscan_reject WITH (
    RANK=100,
    ACTION='reject',
    HAS_FULL_SCAN='/Root/db/orders_archive/*'
);`
	ydbClStream = `CREATE RESOURCE POOL CLASSIFIER cl_stream WITH (
    RANK=500,
    RESOURCE_POOL='pool_stream',
    HAS_STREAM=true
);`
	ydbCombinedPools = `CREATE RESOURCE POOL pool_stream WITH (
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE=20
);

CREATE RESOURCE POOL pool_adhoc_admin WITH (
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE=10
);`
	ydbCombinedClassifiers = `-- Reject full scans of archive tables.
CREATE RESOURCE POOL CLASSIFIER cl_fullscan_reject WITH (
    RANK=100,
    ACTION='reject',
    HAS_FULL_SCAN='/Root/db/orders_archive/*'
);

-- Direct streaming requests to a dedicated pool.
CREATE RESOURCE POOL CLASSIFIER cl_stream WITH (
    RANK=200,
    RESOURCE_POOL='pool_stream',
    HAS_STREAM=true
);

-- Admin requests from the Embedded UI — into the interactive-queries pool.
-- AND condition: both MEMBER_NAME and HAS_APP_NAME must match.
CREATE RESOURCE POOL CLASSIFIER cl_adhoc_admin WITH (
    RANK=300,
    RESOURCE_POOL='pool_adhoc_admin',
    MEMBER_NAME='admin',
    HAS_APP_NAME='ydb-ui'
);`
)

// The reasons the predicates without a host meaning are refused.
const (
	refusedPath     = "HAS_PATH is refused: YDB matches it against the objects in the query's plan, known before the query runs; a command has no plan (the files it will open are known only once it runs, after its pool was chosen), its executable is HAS_APP_NAME's subject, and its working directory is not an object it touches; accepted: RESOURCE_POOL, ACTION, MEMBER_NAME, HAS_APP_NAME, RANK"
	refusedFullScan = "HAS_FULL_SCAN is refused: a full scan is a table read without a key range in YDB's query plan; a command reads no tables through poolagent and has no plan; accepted: RESOURCE_POOL, ACTION, MEMBER_NAME, HAS_APP_NAME, RANK"
	refusedStream   = "HAS_STREAM is refused: YDB's streaming queries are a kind of query (continuous reads and writes over topics) declared to the server; a command has no such kind, and how long it will run is not known when it is classified; accepted: RESOURCE_POOL, ACTION, MEMBER_NAME, HAS_APP_NAME, RANK"
)

// TestYDBClassifierExamplesRefused: YDB's examples whose predicates have
// no host meaning are refused at the predicate, with the reason, and
// nothing of the file applies.
func TestYDBClassifierExamplesRefused(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"HAS_PATH", ydbClArchive, "ydb.sql:4:5: " + refusedPath},
		{"HAS_FULL_SCAN", ydbClFullscanReject, "ydb.sql:4:5: " + refusedFullScan},
		{"HAS_STREAM", ydbClStream, "ydb.sql:4:5: " + refusedStream},
		{"combined example", ydbCombinedPools + "\n" + ydbCombinedClassifiers,
			"ydb.sql:12:5: " + refusedFullScan + "\nydb.sql:19:5: " + refusedStream},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stmts, err := Parse("ydb.sql", []byte(tc.src))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			base := NewModel()
			m, _, err := Apply(base, stmts)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tc.want)
			}
			if m != base || len(m.Classifiers()) != 0 || len(m.Pools()) != 1 {
				t.Error("a refused file changed the model")
			}
		})
	}
}

// classifyCase is a query and the classifier that should take it; ""
// when none does (the query goes to default).
type classifyCase struct {
	name       string
	q          Query
	classifier string
}

// TestYDBClassifierExamples: YDB's examples with a host meaning route as
// YDB routes them.
func TestYDBClassifierExamples(t *testing.T) {
	pools := mustApply(t, NewModel(), `CREATE RESOURCE POOL olap; CREATE RESOURCE POOL pool_adhoc;
		GRANT USE ON RESOURCE POOL olap TO `+"`user1@ldap`"+`; GRANT USE ON RESOURCE POOL pool_adhoc TO '`+AllUsers+`';`)
	m := mustApply(t, pools, ydbClUser+"\n"+ydbClAdhocUI)
	m = mustApply(t, m, ydbCombinedPools+"\nGRANT USE ON RESOURCE POOL pool_adhoc_admin TO admin;")
	// The combined example without the two refused classifiers.
	m = mustApply(t, m, ydbCombinedClassifiers[strings.Index(ydbCombinedClassifiers, "-- Admin requests"):])

	tests := []classifyCase{
		{"MEMBER_NAME user", Query{Account: Account{User: "user1@ldap"}}, "cl_user"},
		{"MEMBER_NAME user, any app", Query{Account: Account{User: "user1@ldap"}, AppName: "ydb-ui"}, "cl_user"},
		{"HAS_APP_NAME exact", Query{Account: Account{User: "bob"}, AppName: "ydb-ui"}, "cl_adhoc_ui"},
		{"HAS_APP_NAME is no prefix match", Query{Account: Account{User: "bob"}, AppName: "ydb-uix"}, ""},
		{"HAS_APP_NAME is case-sensitive", Query{Account: Account{User: "bob"}, AppName: "YDB-UI"}, ""},
		{"no app name", Query{Account: Account{User: "bob"}}, ""},
		// cl_adhoc_ui (rank 200) comes before cl_adhoc_admin (rank 300).
		{"rank order", Query{Account: Account{User: "admin"}, AppName: "ydb-ui"}, "cl_adhoc_ui"},
	}
	check := func(m *Model, tests []classifyCase) {
		t.Helper()
		for _, tc := range tests {
			c, ok := m.Classify(tc.q)
			if ok != (tc.classifier != "") || c.Name != tc.classifier {
				t.Errorf("%s: %+v → %q (%v), want %q", tc.name, tc.q, c.Name, ok, tc.classifier)
			}
		}
	}
	check(m, tests)

	// AND: with cl_adhoc_ui gone, the UI's admin requests need both
	// predicates of cl_adhoc_admin.
	m = mustApply(t, m, "DROP RESOURCE POOL CLASSIFIER cl_adhoc_ui;")
	check(m, []classifyCase{
		{"both predicates hold", Query{Account: Account{User: "admin"}, AppName: "ydb-ui"}, "cl_adhoc_admin"},
		{"member only", Query{Account: Account{User: "admin"}, AppName: "make"}, ""},
		{"app only", Query{Account: Account{User: "bob"}, AppName: "ydb-ui"}, ""},
	})
}

// TestRejectClassifier: ACTION='reject' refuses what it matches, whatever
// pools exist; a classifier without predicates is a catch-all, and the
// classifiers after it never match.
func TestRejectClassifier(t *testing.T) {
	m := mustApply(t, NewModel(), `
		CREATE RESOURCE POOL batch;
		GRANT USE ON RESOURCE POOL batch TO '%etl';
		CREATE RESOURCE POOL CLASSIFIER etl WITH (RANK=100, RESOURCE_POOL='batch', MEMBER_NAME='%etl');
		CREATE RESOURCE POOL CLASSIFIER no_curl WITH (RANK=200, ACTION='reject', HAS_APP_NAME='curl');
		CREATE RESOURCE POOL CLASSIFIER everything_else WITH (RANK=300, ACTION='REJECT');
		CREATE RESOURCE POOL CLASSIFIER never WITH (RANK=400, RESOURCE_POOL='default');`)
	tests := []struct {
		q          Query
		classifier string
	}{
		{Query{Account: Account{User: "bob", Groups: []string{"etl"}}, AppName: "curl"}, "etl"},
		{Query{Account: Account{User: "eve"}, AppName: "curl"}, "no_curl"},
		{Query{Account: Account{User: "eve"}, AppName: "make"}, "everything_else"},
		{Query{Account: Account{User: "eve"}}, "everything_else"},
	}
	for _, tc := range tests {
		c, ok := m.Classify(tc.q)
		if !ok || c.Name != tc.classifier {
			t.Errorf("%+v → %q, want %q", tc.q, c.Name, tc.classifier)
		}
	}
	c, _ := m.Classify(Query{Account: Account{User: "eve"}, AppName: "curl"})
	if c.Action != ActionReject || c.ResourcePool != "" {
		t.Errorf("no_curl = %+v, want a reject classifier without a pool", c)
	}
	if got, want := c.RejectMessage(), "Request is rejected by classifier 'no_curl' (rank=200)"; got != want {
		t.Errorf("message %q, want YDB's %q", got, want)
	}

	// Switching a classifier between routing and rejecting takes both
	// parameters in one ALTER, as exactly one of them must be set.
	m = mustApply(t, m, "ALTER RESOURCE POOL CLASSIFIER never SET (ACTION='reject'), RESET (RESOURCE_POOL);")
	m = mustApply(t, m, "ALTER RESOURCE POOL CLASSIFIER no_curl SET (RESOURCE_POOL='batch'), RESET (ACTION, HAS_APP_NAME);")
	for _, c := range m.Classifiers() {
		switch c.Name {
		case "never":
			if c.Action != ActionReject || c.ResourcePool != "" {
				t.Errorf("never = %+v, want a reject classifier", c)
			}
		case "no_curl":
			if c.Action != "" || c.ResourcePool != "batch" || c.AppName != "" {
				t.Errorf("no_curl = %+v, want a catch-all routing to batch", c)
			}
		}
	}
}
