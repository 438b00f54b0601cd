// Command poolagent-oci is an OCI runtime that puts containers in
// resource pools: called with runc's command line by podman, Docker,
// containerd or CRI-O, it waits in the container's pool's queue on create
// and run, places the container below its query cgroup and runs the real
// runtime (runc or crun); every other subcommand goes straight to the
// runtime. Slim like poolagent-run: it links the standard library,
// golang.org/x/sys, the runtime-spec types and package client
// (docs/containers.md).
package main

import (
	"os"

	"github.com/poolagent/poolagent/internal/oci"
)

func main() {
	os.Exit(oci.Main(os.Args[1:], os.Stdout, os.Stderr))
}
