package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// render prints a parsed statement in one canonical line, so tests can
// compare what different spellings mean.
func render(s Stmt) string {
	obj := func(classifier bool) string {
		if classifier {
			return "CLASSIFIER"
		}
		return "POOL"
	}
	settings := func(ss []setting) string {
		parts := make([]string, len(ss))
		for i, st := range ss {
			parts[i] = st.key.text
			if st.hasValue {
				parts[i] += fmt.Sprintf("=%s(%s)", st.val.kind, st.val.text)
			}
		}
		return strings.Join(parts, " ")
	}
	switch s := s.(type) {
	case *createStmt:
		return fmt.Sprintf("CREATE %s %s [%s]", obj(s.classifier), s.name.text, settings(s.settings))
	case *alterStmt:
		keys := make([]string, len(s.reset))
		for i, k := range s.reset {
			keys[i] = k.text
		}
		return fmt.Sprintf("ALTER %s %s SET [%s] RESET [%s]", obj(s.classifier), s.name.text, settings(s.set), strings.Join(keys, " "))
	case *dropStmt:
		return fmt.Sprintf("DROP %s %s", obj(s.classifier), s.name.text)
	case *grantStmt:
		var privs, objs, members []string
		for _, p := range s.privileges {
			privs = append(privs, p.text)
		}
		for _, o := range s.objects {
			if o.path != "" {
				objs = append(objs, "path:"+o.path)
			} else {
				objs = append(objs, "pool:"+o.pool)
			}
		}
		for _, m := range s.members {
			members = append(members, m.text)
		}
		verb := "GRANT"
		if s.revoke {
			verb = "REVOKE"
		}
		return fmt.Sprintf("%s [%s] ON [%s] TO [%s] option=%v", verb, strings.Join(privs, "|"), strings.Join(objs, "|"), strings.Join(members, "|"), s.grantOption)
	}
	return fmt.Sprintf("%T", s)
}

func TestLexPositions(t *testing.T) {
	src := "-- héllo\nCREATE\tRESOURCE /* x\ny */ POOL `olap`\r\n  WITH(QUEUE_SIZE=-1, X='a''b', Y=\"c\\\"d\", Z=12.5);"
	toks, errs := lex("f.sql", []byte(src))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, tk := range toks {
		got = append(got, fmt.Sprintf("%d:%d %s %s", tk.pos.Line, tk.pos.Col, tk.kind, tk.text))
	}
	want := []string{
		"2:1 word CREATE",
		"2:8 word RESOURCE",
		"3:6 word POOL",
		"3:11 `quoted` name olap",
		"4:3 word WITH",
		"4:7 '(' (",
		"4:8 word QUEUE_SIZE",
		"4:18 '=' =",
		"4:19 number -1",
		"4:21 ',' ,",
		"4:23 word X",
		"4:24 '=' =",
		"4:25 string a'b",
		"4:31 ',' ,",
		"4:33 word Y",
		"4:34 '=' =",
		"4:35 string c\"d",
		"4:41 ',' ,",
		"4:43 word Z",
		"4:44 '=' =",
		"4:45 number 12.5",
		"4:49 ')' )",
		"4:50 ';' ;",
		"4:51 end of file ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tokens:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestParseSpellings checks that every accepted spelling parses to the
// same statement.
func TestParseSpellings(t *testing.T) {
	tests := []struct {
		name string
		srcs []string
		want string
	}{
		{
			name: "keywords in any case, any whitespace, comments",
			srcs: []string{
				"CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=1)",
				"create resource pool olap with (queue_size = 1);",
				"Create\n\tResource -- comment\n Pool /* block\ncomment */ olap\n WITH\n(\n QUEUE_SIZE\n=\n1\n)\n;",
			},
			want: "CREATE POOL olap [QUEUE_SIZE=number(1)]|CREATE POOL olap [queue_size=number(1)]|CREATE POOL olap [QUEUE_SIZE=number(1)]",
		},
		{
			name: "quoted names",
			srcs: []string{"CREATE RESOURCE POOL `my-pool`;", "CREATE RESOURCE POOL 'my-pool';", `CREATE RESOURCE POOL "my-pool";`},
			want: "CREATE POOL my-pool []|CREATE POOL my-pool []|CREATE POOL my-pool []",
		},
		{
			name: "both weight spellings and quoted numbers",
			srcs: []string{`CREATE RESOURCE POOL a WITH (RESOURCES_WEIGHT = 100, RESOURCE_WEIGHT = "100");`},
			want: "CREATE POOL a [RESOURCES_WEIGHT=number(100) RESOURCE_WEIGHT=string(100)]",
		},
		{
			name: "ALTER with SET and RESET actions",
			srcs: []string{"ALTER RESOURCE POOL olap SET (QUEUE_SIZE=100), RESET (QUEUE_SIZE, RESOURCE_WEIGHT), SET (CONCURRENT_QUERY_LIMIT=1)"},
			want: "ALTER POOL olap SET [QUEUE_SIZE=number(100) CONCURRENT_QUERY_LIMIT=number(1)] RESET [QUEUE_SIZE RESOURCE_WEIGHT]",
		},
		{
			name: "CLASSIFIER is the keyword unless it is the pool's name",
			srcs: []string{
				"CREATE RESOURCE POOL CLASSIFIER c WITH (RANK=1)",
				"CREATE RESOURCE POOL classifier WITH (QUEUE_SIZE=1)",
				"DROP RESOURCE POOL CLASSIFIER",
				"DROP RESOURCE POOL CLASSIFIER c",
				"ALTER RESOURCE POOL classifier SET (QUEUE_SIZE=1)",
				"ALTER RESOURCE POOL CLASSIFIER c RESET (RANK)",
			},
			want: "CREATE CLASSIFIER c [RANK=number(1)]|CREATE POOL classifier [QUEUE_SIZE=number(1)]|DROP POOL CLASSIFIER|DROP CLASSIFIER c|ALTER POOL classifier SET [QUEUE_SIZE=number(1)] RESET []|ALTER CLASSIFIER c SET [] RESET [RANK]",
		},
		{
			name: "empty statements and WITH-less CREATE",
			srcs: []string{";;CREATE RESOURCE POOL a;;;CREATE RESOURCE POOL b WITH ()"},
			want: "CREATE POOL a []|CREATE POOL b []",
		},
		{
			name: "GRANT and REVOKE in YDB's and the host form",
			srcs: []string{
				"GRANT SELECT ROW ON `.metadata/workload_manager/pools/olap` TO user1",
				"GRANT 'ydb.granular.select_row', DESCRIBE SCHEMA ON `/Root/.metadata/workload_manager/pools/olap`, `/db` TO `user1@domain`, '%analysts'",
				"GRANT ALL PRIVILEGES ON `/my_db` TO user1 WITH GRANT OPTION",
				"GRANT USE ON RESOURCE POOL olap, etl TO alice",
				"REVOKE GRANT OPTION FOR ALL ON `/my_db` FROM user1",
				"REVOKE GRANT ON `/my_db` FROM user1",
			},
			want: "GRANT [SELECT ROW] ON [path:.metadata/workload_manager/pools/olap] TO [user1] option=false|" +
				"GRANT [ydb.granular.select_row|DESCRIBE SCHEMA] ON [path:/Root/.metadata/workload_manager/pools/olap|path:/db] TO [user1@domain|%analysts] option=false|" +
				"GRANT [ALL PRIVILEGES] ON [path:/my_db] TO [user1] option=true|" +
				"GRANT [USE] ON [pool:olap|pool:etl] TO [alice] option=false|" +
				"REVOKE [ALL] ON [path:/my_db] TO [user1] option=true|" +
				"REVOKE [GRANT] ON [path:/my_db] TO [user1] option=false",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, src := range tc.srcs {
				stmts, err := Parse("f.sql", []byte(src))
				if err != nil {
					t.Fatalf("%s: %v", src, err)
				}
				for _, s := range stmts {
					got = append(got, render(s))
				}
			}
			if g := strings.Join(got, "|"); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

// TestParseErrors checks each syntax error's place and message, and that
// several are reported at once.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"unknown statement", "CREAT RESOURCE POOL olap;",
			`f.sql:1:1: expected a statement (CREATE, ALTER or DROP RESOURCE POOL [CLASSIFIER], GRANT, REVOKE), found "CREAT"`},
		{"missing POOL", "CREATE RESOURCE olap;", `f.sql:1:17: expected POOL after CREATE RESOURCE, found "olap"`},
		{"missing name", "DROP RESOURCE POOL;", "f.sql:1:19: expected a pool name, found ';'"},
		{"unclosed list", "CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=1 ;",
			"f.sql:1:46: expected ',' or ')' in the parameter list, found ';'"},
		{"missing value", "CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=);", "f.sql:1:44: expected a value after QUEUE_SIZE =, found ')'"},
		{"trailing words", "CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=1) garbage;",
			`f.sql:1:47: expected ';' after the statement, found "garbage"`},
		{"ALTER without action", "ALTER RESOURCE POOL olap;", "f.sql:1:25: expected SET (…) or RESET (…) after ALTER RESOURCE POOL olap, found ';'"},
		{"RESET with values", "ALTER RESOURCE POOL olap RESET (QUEUE_SIZE=1);",
			"f.sql:1:43: expected ',' or ')' in the RESET list, found '='"},
		{"unquoted dotted name", "CREATE RESOURCE POOL my.pool;",
			"f.sql:1:22: \"my.pool\" must be quoted: `…` or '…' around names and paths with '.', '/', '-', '%' or '@' (`.metadata/workload_manager/pools/olap`, 'all-users@well-known')"},
		{"unquoted name with a dash, before a comment", "DROP RESOURCE POOL my-pool--gone\n;",
			"f.sql:1:20: \"my-pool\" must be quoted: `…` or '…' around names and paths with '.', '/', '-', '%' or '@' (`.metadata/workload_manager/pools/olap`, 'all-users@well-known')"},
		{"unquoted path", "GRANT SELECT ON /my_db TO u;",
			"f.sql:1:17: \"/my_db\" must be quoted: `…` or '…' around names and paths with '.', '/', '-', '%' or '@' (`.metadata/workload_manager/pools/olap`, 'all-users@well-known')"},
		{"unclosed string", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='olap);",
			"f.sql:1:55: string opened with ' here is not closed"},
		{"unclosed back quote", "DROP RESOURCE POOL `olap;", "f.sql:1:20: name opened with ` here is not closed"},
		{"unclosed comment", "CREATE RESOURCE POOL a; /* open", "f.sql:1:25: comment /* is not closed with */"},
		{"malformed number", "CREATE RESOURCE POOL a WITH (QUEUE_SIZE=10k);",
			`f.sql:1:41: malformed number "10k"; accepted: an integer or a decimal such as -1, 70, 12.5`},
		{"invalid UTF-8", "CREATE RESOURCE POOL a\xff;", "f.sql:1:23: invalid UTF-8 byte"},
		{"GRANT without ON", "GRANT SELECT ROW TO u;", `f.sql:1:18: expected ON after the rights of GRANT, found "TO"`},
		{"GRANT without rights", "GRANT ON `/db` TO u;",
			"f.sql:1:7: expected a right after GRANT (SELECT ROW, ALL, 'ydb.generic.use', …), found \"ON\""},
		{"REVOKE with TO", "REVOKE SELECT ON `/db` TO u;", `f.sql:1:24: expected FROM after the objects of REVOKE, found "TO"`},
		{"several errors, one per statement", "CREATE RESOURCE POOL a WITH (X=1;\nDROP RESOURCE POOL;\nCREATE RESOURCE POOL ok;\nALTER RESOURCE POOL b FOO;",
			"f.sql:1:33: expected ',' or ')' in the parameter list, found ';'\n" +
				"f.sql:2:19: expected a pool name, found ';'\n" +
				`f.sql:4:23: expected SET (…) or RESET (…) after ALTER RESOURCE POOL b, found "FOO"`},
		{"a lexical error is reported once, not again by the parser", "CREATE RESOURCE POOL a$b;\nCREATE RESOURCE POOL c WITH (QUEUE_SIZE=?);",
			"f.sql:1:23: unexpected character '$'\nf.sql:2:41: unexpected character '?'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stmts, err := Parse("f.sql", []byte(tc.src))
			if err == nil {
				t.Fatalf("parsed without error: %d statements", len(stmts))
			}
			if stmts != nil {
				t.Errorf("statements returned with an error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

// FuzzParse feeds arbitrary text to the parser and, when it parses, to
// Apply: neither may panic, every problem must carry a position inside
// the input, and a refused Apply must leave the model as it was.
func FuzzParse(f *testing.F) {
	f.Add([]byte("CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=1, CONCURRENT_QUERY_LIMIT=2);"))
	f.Fuzz(func(t *testing.T, src []byte) {
		lines := strings.Count(string(src), "\n") + 1
		checkPos := func(err error) {
			t.Helper()
			list, ok := err.(ErrorList)
			if !ok || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Pos.File != "fuzz.sql" || e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 {
					t.Fatalf("error outside the input (%d lines): %v", lines, e)
				}
			}
		}
		stmts, err := Parse("fuzz.sql", src)
		if err != nil {
			checkPos(err)
			return
		}
		base := loadFuzzBase(t)
		before := base.Pools()
		m, _, err := Apply(base, stmts)
		if err != nil {
			checkPos(err)
			if m != base || len(m.Pools()) != len(before) {
				t.Fatal("refused Apply changed the model")
			}
			return
		}
		if _, ok := m.Pool(DefaultPool); !ok {
			t.Fatal("default pool gone")
		}
		// The one thing a node refuses is a CPUS outside it, at the setting.
		if _, err := Plan(m, Node{CPUs: 3.5, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}, Activity{}); err != nil {
			checkPos(err)
		}
	})
}

// loadFuzzBase is a model with one pool, a classifier and a grant, for
// fuzzed statements to act on.
func loadFuzzBase(t *testing.T) *Model {
	return mustApply(t, NewModel(), `CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=70, RESOURCES_WEIGHT=10);
		CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='olap');
		GRANT SELECT ROW ON RESOURCE POOL olap TO alice;`)
}
