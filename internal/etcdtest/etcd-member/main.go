// Command etcd-member runs one member of an etcd cluster, embedded from
// go.etcd.io/etcd/server/v3, until it is killed or gets SIGTERM. Tests of
// package fleet run three of them as separate processes on loopback so
// that they can kill members; package etcdtest builds and starts it. It is
// never part of the poolagent or poolagent-run binaries.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("name", "m0", "member name")
	dir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("client-url", "", "client URL to listen on and advertise, e.g. http://127.0.0.1:2379 (required)")
	peer := flag.String("peer-url", "", "peer URL to listen on and advertise (required)")
	cluster := flag.String("initial-cluster", "", "name=peer-url,... of every member (required)")
	state := flag.String("state", "new", "initial cluster state: new or existing")
	noFsync := flag.Bool("unsafe-no-fsync", false, "do not fsync the log (tests that measure nothing)")
	flag.Parse()
	if *dir == "" || *client == "" || *peer == "" || *cluster == "" {
		return fmt.Errorf("-data-dir, -client-url, -peer-url and -initial-cluster are required")
	}
	cu, err := url.Parse(*client)
	if err != nil {
		return fmt.Errorf("-client-url %q: %w", *client, err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		return fmt.Errorf("-peer-url %q: %w", *peer, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = *cluster
	cfg.InitialClusterToken = "poolagent-test"
	cfg.ClusterState = *state
	cfg.UnsafeNoFsync = *noFsync
	cfg.LogLevel = "error"
	if !strings.HasPrefix(cfg.InitialCluster, *name+"=") && !strings.Contains(cfg.InitialCluster, ","+*name+"=") {
		return fmt.Errorf("-initial-cluster %q does not name this member %q", *cluster, *name)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case <-time.After(time.Minute):
		return fmt.Errorf("member %s not ready after a minute", *name)
	case s := <-sig:
		return fmt.Errorf("stopped by %s before ready", s)
	}
	select {
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	}
}
