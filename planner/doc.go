// Package planner turns pool definitions into the desired cgroup state.
//
// A pool file is YDB's resource pool DDL: Parse reads it into statements,
// Apply carries them out in order on a Model (all or nothing, every
// problem reported as FILE:LINE:COL: message), and Plan divides a node's
// vCPUs among the active pools by weighted max-min fairness and returns
// each pool's and each query's cgroup limits (Desired) for cgroupfs to
// write; WriteText and WriteJSON print a plan as `poolagent plan` shows it.
// The package is pure: no files, no clock. docs/pools.md describes the
// language, the rules and the division.
package planner
