package fleet

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/poolagent/poolagent/internal/admission"
)

// Every value read from etcd is checked as strictly as a pool file: a
// member, or a client with write access to the cluster's prefix, is input
// like any other (docs/security.md, "etcd"). A value that fails is logged
// and not used (a query key that fails still takes its slot: see applyPut).

// Bounds of what a node accepts from etcd.
const (
	maxQueryValue = 1 << 10 // bytes of a query key's value
	maxNodeValue  = 1 << 10 // bytes of a node record
	maxDefsValue  = 1 << 20 // bytes of the pool definitions
	maxVCPUs      = 1 << 16 // vCPUs of a node record
	maxChanges    = 1 << 16 // run-time changes in the definitions
	maxArrived    = 1 << 46 // milliseconds since 1970: about the year 4200
	maxSlot       = 1 << 24 // slot index of a slot key
	maxUser       = 256     // bytes of a user name
)

// decodeUsage reads the value of a usage key.
func decodeUsage(value []byte) (admission.Usage, error) {
	var u usageRecord
	if len(value) > maxQueryValue {
		return admission.Usage{}, fmt.Errorf("%d bytes, want at most %d", len(value), maxQueryValue)
	}
	if err := json.Unmarshal(value, &u); err != nil {
		return admission.Usage{}, err
	}
	if math.IsNaN(u.Seconds) || u.Seconds < 0 || u.Seconds > math.MaxInt32 || u.AtUnixMilli < 0 || u.AtUnixMilli > maxArrived {
		return admission.Usage{}, fmt.Errorf("usage %g s at %d ms: want 0..%d seconds at milliseconds since 1970", u.Seconds, u.AtUnixMilli, math.MaxInt32)
	}
	return u.usage(), nil
}

// decodeNodeRecord reads the record of node name (from its key, which the
// value must agree with).
func decodeNodeRecord(name string, value []byte) (NodeRecord, error) {
	var r NodeRecord
	if err := validNodeName("node", name); err != nil {
		return r, err
	}
	if len(value) > maxNodeValue {
		return r, fmt.Errorf("node record of %s: %d bytes, want at most %d", name, len(value), maxNodeValue)
	}
	if err := json.Unmarshal(value, &r); err != nil {
		return r, fmt.Errorf("node record of %s: %w", name, err)
	}
	switch {
	case r.Node != name:
		return r, fmt.Errorf("node record of %s names node %q: want the name in its key", name, r.Node)
	case r.VCPUs < 0 || r.VCPUs > maxVCPUs:
		return r, fmt.Errorf("node record of %s: vcpus %d, want 0 (unknown) to %d", name, r.VCPUs, maxVCPUs)
	case math.IsNaN(r.LoadPercent) || r.LoadPercent < 0 || r.LoadPercent > 100:
		return r, fmt.Errorf("node record of %s: load_percent %v, want 0 to 100", name, r.LoadPercent)
	case r.UpdatedUnix < 0 || r.UpdatedUnix > maxArrived/1000:
		return r, fmt.Errorf("node record of %s: updated %d, want seconds since 1970", name, r.UpdatedUnix)
	case len(r.Version) > 64 || !printable(r.Version):
		return r, fmt.Errorf("node record of %s: version %q, want up to 64 printable characters", name, clip(r.Version))
	}
	return r, nil
}

// parseToken splits a token, <node>.<lease in hex>.<n>.
func parseToken(token string) (node string, seq uint64, err error) {
	rest, n, ok := cutLast(token, '.')
	node, lease, ok2 := cutLast(rest, '.')
	if !ok || !ok2 {
		return "", 0, fmt.Errorf("token %q: want NODE.LEASE.N", clip(token))
	}
	if err := validNodeName("node", node); err != nil {
		return "", 0, fmt.Errorf("token %q: %w", clip(token), err)
	}
	if _, err := strconv.ParseUint(lease, 16, 64); err != nil {
		return "", 0, fmt.Errorf("token %q: lease %q, want hexadecimal", clip(token), clip(lease))
	}
	if seq, err = strconv.ParseUint(n, 10, 64); err != nil {
		return "", 0, fmt.Errorf("token %q: number %q, want decimal", clip(token), clip(n))
	}
	return node, seq, nil
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// decodeEntry reads the value of a query key: name is the key's last
// segment, the token for a queue or extra key, s<i> for a slot key.
func decodeEntry(dir, name string, value []byte) (entry, error) {
	var e entry
	if len(value) > maxQueryValue {
		return e, fmt.Errorf("%d bytes, want at most %d", len(value), maxQueryValue)
	}
	if err := json.Unmarshal(value, &e); err != nil {
		return e, err
	}
	node, seq, err := parseToken(e.Token)
	if err != nil {
		return e, err
	}
	switch {
	case dir == slotDir:
		i, err := strconv.Atoi(strings.TrimPrefix(name, "s"))
		if !strings.HasPrefix(name, "s") || err != nil || i < 0 || i >= maxSlot {
			return e, fmt.Errorf("slot %q, want s0 to s%d", clip(name), maxSlot-1)
		}
	case name != e.Token:
		return e, fmt.Errorf("token %q in the value of key %q: want the key's", clip(e.Token), clip(name))
	}
	switch {
	case e.Node != node:
		return e, fmt.Errorf("node %q, token of node %q: want the token's node", clip(e.Node), node)
	case e.ArrivedUnixMilli < 0 || e.ArrivedUnixMilli > maxArrived:
		return e, fmt.Errorf("arrived %d, want milliseconds since 1970", e.ArrivedUnixMilli)
	case len(e.User) > maxUser || !printable(e.User):
		return e, fmt.Errorf("user %q: want at most %d printable bytes", clip(e.User), maxUser)
	}
	e.seq = seq
	return e, nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// clip shortens what an error quotes from a value.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
