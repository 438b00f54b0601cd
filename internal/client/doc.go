// Package client is the poolagent daemon's client side, what `poolagent
// run`, the slim poolagent-run and the CLI's views share: [RunCommand] is
// the whole run command (flags, the request, waiting in the queue, running
// the command in place or through the gate, the statistics and the exit
// status), [Ask] sends one view or DDL request and returns the reply, and
// [Dial] opens the socket. It speaks package protocol and links only the
// standard library and golang.org/x/sys, never the daemon, the planner or
// the simulator, so poolagent-run stays small and starts fast
// (docs/admission.md, "A query's life"; docs/performance.md).
package client
