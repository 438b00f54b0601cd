package protocol

import (
	"encoding/json"
	"testing"
)

// marshalLine is what the daemon's and the clients' encoders write.
func marshalLine(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestAppendRequestIsMarshal(t *testing.T) {
	for _, r := range []Request{
		{Op: OpExec},
		{Op: OpRun, Pool: "olap", Progress: true, App: "python3.11"},
		{Op: OpExec, App: "a\"b\\c\n\r\t\x01\x1f<>&\u2028\u2029é\xff\xfe"},
		{Op: OpExec, Pool: "日本", App: "\x7f"},
	} {
		if got, want := string(AppendRequest(nil, r)), string(marshalLine(t, r)); got != want {
			t.Errorf("AppendRequest(%+v) = %s, want %s", r, got, want)
		}
	}
}

func TestParseReply(t *testing.T) {
	for _, tt := range []struct {
		line string
		want Reply
		ok   bool
	}{
		{line: `{"type":"started","pool":"default","query":"q1-7","cpu_limit":1.5}` + "\n", ok: true,
			want: Reply{Type: ReplyStarted, Pool: "default", Query: "q1-7", CPULimit: 1.5}},
		{line: ` { "type" : "queued" , "pool" : "olap", "position": 3 } `, ok: true,
			want: Reply{Type: ReplyQueued, Pool: "olap", Position: 3}},
		{line: `{"type":"error","code":"queue_full","error":"Too many pending requests for pool olap"}`, ok: true,
			want: Reply{Type: ReplyError, Code: CodeQueueFull, Error: "Too many pending requests for pool olap"}},
		{line: `{}`, ok: true},
		{line: `{"type":null,"position":null,"cpu_limit":null}`, ok: true},
		// Declined, for encoding/json to read (or refuse).
		{line: `{"type":"queued","wait":{"reason":"limit"}}`},
		{line: `{"type":"error","error":"pool \u003cp\u003e"}`},
		{line: `{"Type":"started"}`},
		{line: `{"type":"started","extra":1}`},
		{line: `{"position":1.5}`},
		{line: `{"position":01}`},
		{line: `{"cpu_limit":1e999}`},
		{line: `{"type":"started"} x`},
		{line: `{"type":"started",}`},
		{line: `{"type":"a` + "\x01" + `"}`},
		{line: `{"type":"` + "\xff" + `"}`},
		{line: `[]`},
		{line: ``},
	} {
		got, ok := ParseReply([]byte(tt.line))
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseReply(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseReply: every line ParseReply takes, encoding/json reads as the
// same Reply; and every Reply without Wait or Stats, as the daemon encodes
// it, ParseReply takes unless a string needed an escape.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`{"type":"started","pool":"default","query":"q1-7","cpu_limit":1.5}`,
		`{"type":"queued","pool":"olap","position":3,"wait":{"reason":"limit","ahead":0}}`,
		`{"type":"error","code":"rejected","error":"Request is rejected by classifier 'c' (rank=1)"}`,
		`{"position":-0,"cpu_limit":2E-3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := ParseReply(line)
		if ok {
			var want Reply
			if err := json.Unmarshal(line, &want); err != nil {
				t.Fatalf("ParseReply took %q, which encoding/json refuses: %v", line, err)
			}
			if got != want {
				t.Fatalf("ParseReply(%q) = %+v; encoding/json reads %+v", line, got, want)
			}
			again, ok := ParseReply(marshalLine(t, got))
			if !ok && !needsEscape(got) || ok && again != got {
				t.Fatalf("ParseReply of %+v as encoded: %+v, %v", got, again, ok)
			}
		}
	})
}

// FuzzAppendRequest: AppendRequest writes what encoding/json writes.
func FuzzAppendRequest(f *testing.F) {
	f.Add("exec", "olap", true, "python3.11")
	f.Add("run", "", false, "a\"\\<\u2028\xff")
	f.Fuzz(func(t *testing.T, op, pool string, progress bool, app string) {
		r := Request{Op: op, Pool: pool, Progress: progress, App: app}
		if got, want := string(AppendRequest(nil, r)), string(marshalLine(t, r)); got != want {
			t.Fatalf("AppendRequest(%+v) = %s, want %s", r, got, want)
		}
	})
}

// needsEscape reports whether encoding/json escapes something in one of
// r's strings.
func needsEscape(r Reply) bool {
	for _, s := range []string{r.Type, r.Pool, r.Classifier, r.Query, r.Error, r.Code} {
		if string(appendString(nil, s)) != `"`+s+`"` {
			return true
		}
	}
	return false
}
