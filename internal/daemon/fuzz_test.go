package daemon

import (
	"bufio"
	"encoding/json"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// FuzzRequest sends arbitrary bytes as a client's side of the protocol:
// the daemon must answer with well-formed replies, never crash, and free
// whatever the connection held once it closes. Seed corpus:
// testdata/fuzz/FuzzRequest.
func FuzzRequest(f *testing.F) {
	cg := newFakeCgroups(f)
	d := startDaemon(f, Config{}, policyOf(f, olapPool(1, 2, "")), cg, peer.SystemUsers{})
	f.Fuzz(func(t *testing.T, in []byte) {
		conn, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(in)
		conn.(*net.UnixConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		known := []string{protocol.ReplyQueued, protocol.ReplyAdmitted, protocol.ReplyStarted, protocol.ReplyDone, protocol.ReplyError}
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			var r protocol.Reply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || !slices.Contains(known, r.Type) {
				t.Fatalf("reply %q: %v", sc.Bytes(), err)
			}
		}
		conn.Close()
		waitFor(t, "the connection's slots to free", func() bool {
			for _, p := range d.srv.reg.pools() {
				if p.Running != 0 || p.Queued != 0 {
					return false
				}
			}
			return true
		})
		if n := cg.left(); n != 0 {
			t.Fatalf("%d query cgroups left", n)
		}
	})
}
