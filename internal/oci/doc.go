// Package oci is poolagent-oci's logic: an OCI runtime's command line
// (runc's and crun's spellings) read and rewritten, a container's
// config.json read with the runtime-spec types and rewritten to place the
// container below its query's cgroup, and the wrapper itself, which waits
// in the pool's queue before it runs the real runtime (docs/containers.md).
//
// It links what the slim client links (the standard library, x/sys and
// package client) and github.com/opencontainers/runtime-spec.
package oci
