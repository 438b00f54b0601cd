package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/poolagent/poolagent/internal/state"
	"github.com/poolagent/poolagent/planner"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefinitionsFormat identifies the layout of the defs key's value; another
// value is refused rather than guessed at.
const DefinitionsFormat = "poolagent-cluster-defs/1"

// Definitions are the cluster's pool definitions: the pool file that
// seeded the cluster and the run-time changes accepted since, in order, as
// on one host (package state), but shared by every node.
type Definitions struct {
	Format string `json:"format"`
	// Seed names the node and pool file that seeded the cluster, for
	// positions in errors: "node:/etc/poolagent/pools.sql".
	Seed string `json:"seed"`
	// PoolFile is that file's content when it seeded the cluster.
	PoolFile string         `json:"pool_file"`
	Changes  []state.Change `json:"changes"`
	// Rev is the etcd revision that last wrote them; a change is written
	// only if they are still at Rev.
	Rev int64 `json:"-"`
}

// decodeDefinitions reads the defs key's value as strictly as a pool file:
// its pool file and changes must make a model, with the errors a pool
// file would get (positions named after Seed).
func decodeDefinitions(data []byte, rev int64) (Definitions, error) {
	var d Definitions
	if len(data) > maxDefsValue {
		return Definitions{}, fmt.Errorf("pool definitions: %d bytes, want at most %d", len(data), maxDefsValue)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Definitions{}, fmt.Errorf("pool definitions: %w", err)
	}
	switch {
	case d.Format != DefinitionsFormat:
		return Definitions{}, fmt.Errorf("pool definitions: format %q, want %q", clip(d.Format), DefinitionsFormat)
	case len(d.Seed) > 512 || !printable(d.Seed):
		return Definitions{}, fmt.Errorf("pool definitions: seed %q, want up to 512 printable characters (NODE:FILE)", clip(d.Seed))
	case len(d.Changes) > maxChanges:
		return Definitions{}, fmt.Errorf("pool definitions: %d run-time changes, want at most %d", len(d.Changes), maxChanges)
	}
	for i, c := range d.Changes {
		if c.Seq != uint64(i)+1 {
			return Definitions{}, fmt.Errorf("pool definitions: change %d numbered %d, want %d (numbered from 1 without gaps)", i+1, c.Seq, i+1)
		}
	}
	if _, _, err := d.Model(); err != nil {
		return Definitions{}, fmt.Errorf("pool definitions do not load: %w", err)
	}
	d.Rev = rev
	return d, nil
}

// Model is the pool model the definitions make.
func (d Definitions) Model() (*planner.Model, []planner.Warning, error) {
	return state.Effective(d.Seed, []byte(d.PoolFile), d.Seed+"#changes", d.Changes)
}

// Definitions reads the cluster's pool definitions. ok is false when the
// cluster has none yet.
func (b *Backend) Definitions(ctx context.Context) (d Definitions, ok bool, err error) {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Get(rctx, b.keys.defs())
	b.session.note(start, err)
	if err != nil {
		return Definitions{}, false, b.unreachable(err)
	}
	if len(resp.Kvs) == 0 {
		return Definitions{}, false, nil
	}
	d, err = decodeDefinitions(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	return d, err == nil, err
}

// Seed makes a pool file (named source, its content src, and the run-time
// changes made to it on this node) the cluster's pool definitions if the
// cluster has none, and returns the cluster's definitions either way:
// seeded reports whether this call wrote them.
func (b *Backend) Seed(ctx context.Context, source string, src []byte, changes []state.Change) (d Definitions, seeded bool, err error) {
	d = Definitions{Format: DefinitionsFormat, Seed: b.cfg.Node + ":" + source, PoolFile: string(src), Changes: changes}
	v, _ := json.Marshal(d)
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.keys.defs()), "=", 0)).
		Then(clientv3.OpPut(b.keys.defs(), string(v))).
		Else(clientv3.OpGet(b.keys.defs())).
		Commit()
	b.session.note(start, err)
	if err != nil {
		return Definitions{}, false, b.unreachable(err)
	}
	if resp.Succeeded {
		d.Rev = resp.Header.Revision
		return d, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return Definitions{}, false, fmt.Errorf("pool definitions vanished from the cluster while seeding; try again")
	}
	d, err = decodeDefinitions(kvs[0].Value, kvs[0].ModRevision)
	return d, false, err
}

// Update writes d as the cluster's pool definitions if they are still at
// d.Rev (the revision they were read at); otherwise it returns ErrConflict
// and writes nothing. It returns the new revision.
func (b *Backend) Update(ctx context.Context, d Definitions) (int64, error) {
	d.Format = DefinitionsFormat
	v, _ := json.Marshal(d)
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(b.keys.defs()), "=", d.Rev)).
		Then(clientv3.OpPut(b.keys.defs(), string(v))).
		Else(clientv3.OpGet(b.keys.defs(), clientv3.WithKeysOnly())).
		Commit()
	b.session.note(start, err)
	if err != nil {
		return 0, fmt.Errorf("change not written, nothing changed: %w", b.unreachable(err))
	}
	if !resp.Succeeded {
		now := int64(0)
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			now = kvs[0].ModRevision
		}
		return 0, fmt.Errorf("%w: they were read at etcd revision %d and another change wrote them at revision %d; "+
			"nothing was changed: look at the pools again and repeat the change if it still applies", ErrConflict, d.Rev, now)
	}
	return resp.Header.Revision, nil
}
