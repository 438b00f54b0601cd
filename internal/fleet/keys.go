package fleet

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// The cluster's keys, all under /poolagent/<cluster>/ (docs/fleet.md):
//
//	nodes/<node>          a node's record (JSON), on the node's lease
//	defs                  the shared pool definitions (JSON), no lease
//	q/<pool>/<token>      a queued query, on its node's lease; the FIFO
//	                      order is the keys' create revision
//	r/<pool>/s<i>         a running query in slot i < CONCURRENT_QUERY_LIMIT,
//	                      on its node's lease
//	x/<pool>/<token>      a running query without a slot: in a pool without
//	                      a concurrency limit, or re-registered after its node
//	                      lost its lease (it may exceed the limit; new queries
//	                      wait until the pool is back under it)
//	u/<pool>/<user>       a user's CPU time in the pool, decayed (JSON), no
//	                      lease: what the fair order counts after the
//	                      running queries; <user> path-escaped
//
// Slot and extra keys of a pool with strict slots (GLOBAL_SLOTS='strict')
// have no lease (strict.go). A token names one registration of one query:
// <node>.<lease>.<n>.
const (
	nodesDir = "nodes/"
	defsKey  = "defs"
	queueDir = "q/"
	slotDir  = "r/"
	extraDir = "x/"
	usageDir = "u/"
)

// entry is the value of a query key.
type entry struct {
	Node  string `json:"node"`
	Token string `json:"token"`
	// ArrivedUnixMilli is when the query arrived on its node.
	ArrivedUnixMilli int64 `json:"arrived"`
	// User is who runs the query, for the pool's per-user limits and fair
	// order; "" for a query whose user is not known (adopted).
	User string `json:"user,omitempty"`

	key   string
	rev   int64  // create revision
	seq   uint64 // the token's number (tokenSeq)
	lease int64
}

func (e entry) value() string {
	b, _ := json.Marshal(e)
	return string(b)
}

// keySpace builds and parses the keys of one cluster.
type keySpace struct{ prefix string }

func newKeySpace(cluster string) keySpace { return keySpace{prefix: "/poolagent/" + cluster + "/"} }

func (k keySpace) node(name string) string          { return k.prefix + nodesDir + name }
func (k keySpace) defs() string                     { return k.prefix + defsKey }
func (k keySpace) queue(pool string) string         { return k.prefix + queueDir + pool + "/" }
func (k keySpace) slots(pool string) string         { return k.prefix + slotDir + pool + "/" }
func (k keySpace) extras(pool string) string        { return k.prefix + extraDir + pool + "/" }
func (k keySpace) queued(pool, token string) string { return k.queue(pool) + token }
func (k keySpace) slot(pool string, i int) string   { return k.slots(pool) + "s" + strconv.Itoa(i) }
func (k keySpace) extra(pool, token string) string  { return k.extras(pool) + token }
func (k keySpace) usage(pool, user string) string {
	return k.prefix + usageDir + pool + "/" + url.PathEscape(user)
}

// usageRecord is the value of a usage key: the user's decayed CPU time in
// the pool as of AtUnixMilli.
type usageRecord struct {
	Seconds     float64 `json:"seconds"`
	AtUnixMilli int64   `json:"at"`
}

func (u usageRecord) usage() admission.Usage {
	return admission.Usage{Seconds: u.Seconds, At: time.UnixMilli(u.AtUnixMilli)}
}

// parse splits a key of the cluster into its directory (nodesDir,
// defsKey, queueDir, slotDir, extraDir) and, for query keys, the pool; ""
// for a key the cluster does not use.
func (k keySpace) parse(key string) (dir, pool string) {
	rest, ok := strings.CutPrefix(key, k.prefix)
	if !ok {
		return "", ""
	}
	if rest == defsKey {
		return defsKey, ""
	}
	if strings.HasPrefix(rest, nodesDir) {
		return nodesDir, ""
	}
	for _, d := range []string{queueDir, slotDir, extraDir, usageDir} {
		if r, ok := strings.CutPrefix(rest, d); ok {
			pool, _, ok := strings.Cut(r, "/")
			if !ok || pool == "" {
				return "", ""
			}
			return d, pool
		}
	}
	return "", ""
}

// name is the last segment of a query or usage key that parse split into
// dir and pool: the token, or the escaped user.
func (k keySpace) name(key, dir, pool string) string {
	return key[len(k.prefix)+len(dir)+len(pool)+1:]
}

// validNodeName is the rule for --node and --cluster: they become key
// segments and parts of tokens.
func validNodeName(what, name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%s %q: want 1 to 64 of A-Z a-z 0-9 _ - .", what, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%s %q: character %q not allowed; want 1 to 64 of A-Z a-z 0-9 _ - .", what, name, c)
		}
	}
	return nil
}
