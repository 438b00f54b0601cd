package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/state"
	"github.com/poolagent/poolagent/planner"
)

// TLSFiles name the PEM files of the etcd client's TLS: the CA that signed
// the members' certificates, and the node's client certificate and key.
// All empty: no TLS.
type TLSFiles struct{ CA, Cert, Key string }

// Config loads the files into a client TLS configuration; nil when none is
// named.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f == (TLSFiles{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("client certificate %q and key %q: give both or neither", f.Cert, f.Key)
	}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s, key %s: %w", f.Cert, f.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate in it", f.CA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Join makes a daemon a node of the cluster cfg names: it opens the
// backend with the local model's limits, then makes the cluster's pool
// definitions the model. An empty cluster is seeded with the pool file
// (and the run-time changes made to it on this host); a cluster that has
// definitions keeps them, and the returned Shared's Note says so when they
// differ from the file. When etcd does not answer, the node starts on the
// local model and joins once it does (seedLater). It warns, in cfg.Log,
// about a connection to etcd that anyone on its network could use: an
// endpoint without TLS, no client certificate, or a cluster without
// authentication.
func Join(ctx context.Context, cfg Config, local *planner.Model, poolFile string, changes []state.Change) (*Backend, *Shared, *planner.Model, []planner.Warning, error) {
	b, err := Open(ctx, cfg, admission.LimitsFromModel(local))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	reached := b.cluster.read()
	b.warnInsecure(ctx, reached)
	data, err := os.ReadFile(poolFile)
	if err != nil {
		b.Close()
		return nil, nil, nil, nil, fmt.Errorf("read pool file: %w", err)
	}
	shared := &Shared{Backend: b}
	var model *planner.Model
	var warns []planner.Warning
	if reached {
		model, warns, err = shared.Seed(poolFile, data, changes)
	}
	switch {
	case !reached || err != nil && transient(err):
		// etcd did not answer (Open): the pool file is in force until it
		// does.
		shared.setNote("etcd unreachable at start: %s in force until the cluster answers, then the cluster's definitions", poolFile)
		b.wg.Go(func() { shared.seedLater(poolFile, data, changes) })
		return b, shared, local, nil, nil
	case err != nil:
		b.Close()
		return nil, nil, nil, nil, fmt.Errorf("cluster pool definitions: %w", err)
	}
	return b, shared, model, warns, nil
}

// warnInsecure logs, loudly, what lets someone other than the cluster's
// nodes and administrators read or rewrite its keys (docs/security.md,
// "etcd"); whether authentication is on only when etcd answers (reached).
func (b *Backend) warnInsecure(ctx context.Context, reached bool) {
	for _, e := range b.cfg.Endpoints {
		if u, err := url.Parse(e); err == nil && u.Scheme != "https" {
			b.log.Warn("etcd endpoint without TLS: anyone who can reach it can read and rewrite the cluster's pool definitions (and grant themselves administration) and its admission keys; use https:// with --etcd-cacert/--etcd-cert/--etcd-key (docs/fleet.md, \"Securing etcd\")", "endpoint", e)
		}
	}
	if b.cfg.TLS == nil || len(b.cfg.TLS.Certificates) == 0 {
		b.log.Warn("no etcd client certificate: etcd cannot tell this node from any other client; give --etcd-cert and --etcd-key and enable client certificate authentication (docs/fleet.md, \"Securing etcd\")")
	}
	if !reached {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	st, err := b.cli.AuthStatus(rctx)
	switch {
	case err != nil && !errors.Is(err, context.DeadlineExceeded):
		b.log.Warn("etcd authentication status unknown", "err", err)
	case err == nil && !st.Enabled:
		b.log.Warn("etcd authentication is off: any client of the cluster may rewrite the keys under " + b.keys.prefix + "; enable it with a role limited to that prefix (docs/fleet.md, \"Securing etcd\")")
	}
}
