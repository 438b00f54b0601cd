// Package poolagent is the map of this repository: which package owns which
// idea. The code lives in the packages below; this one holds nothing else.
//
// The top level is the library, importable by other programs: cgroupfs (the
// kernel's door), planner (pools to cgroup state), simulate (the models) and
// observe (what the kernel reports). cmd/ holds the programs, scripts/ what
// runs around them and testdata/ what the tests read. Everything else is
// the program's machinery, under internal/, where no other module can
// import it.
//
// # Kernel: the cgroups poolagent writes and the processes it moves
//
//   - internal/cpulimit: a cgroup's CPU limit as one value (quota, period, burst,
//     weight, idle, CPUs) and the kernel's encodings of it, v2 and v1.
//   - cgroupfs: the one door to the cgroup filesystem, to read and to write,
//     one file per controller (cpu, memory, cpuset, pids), iterated from
//     one table (controller.go); opens beneath the root
//     (openat2), finds the mounts, diffs a plan against the tree and applies
//     it in the kernel's order; owns a pool root while a writer runs.
//   - internal/pooltree: poolagent's pool tree on this host as one handle: the root
//     found from the mounts, its queries' cgroups from creation to removal.
//   - internal/peer: which process is at the other end of the socket (peer
//     credentials, pidfd, /proc status), and holding it still while it moves.
//
// # Admission: who may run, where, and when
//
//   - planner: YDB's resource pool DDL parsed into a pool model, and the
//     model divided over a node (weighted max-min) into the desired cgroup
//     state, printed as `poolagent plan` shows it. Pure.
//   - internal/admission: a pool's concurrency limit, queue, queue-wait deadline and
//     CPU-load threshold, per user where asked. Pure.
//   - internal/state: the journal of run-time DDL changes (`poolagent sql`) in the
//     state directory, applied over the pool file at every start and reload.
//   - internal/fleet: admission across many hosts, the global limits kept in etcd.
//   - internal/daemon: the admission service: the socket, a query's life from
//     request to release, replanning when the active pools change.
//   - internal/protocol: the messages on the daemon's socket, shared by both ends.
//   - internal/client: the client side, what `poolagent run` and poolagent-run run.
//
// # Prediction: what the kernel will report before it does
//
//   - simulate: the models, pure and deterministic: the chapter's (one
//     group, in ticks, the book chapter on cpu.max throttling), the simple
//     host model, and the kernel-faithful model.
//   - internal/compare: a scenario run for real under poolagent's cgroups, its
//     measured counters beside the models' predictions (text, JSON, HTML).
//   - internal/accuracy: the workload classes and the kernel-faithful model's
//     measured error for each; internal/accuracy/gen writes it, and the table of
//     docs/accuracy.md, from an accuracy run's reports.
//   - internal/advise: a recorded pool diagnosed, and the smallest change of its limit
//     that meets a throttle budget.
//   - internal/history: a pool's trace (the file format advise reads), and the one
//     sampler that takes it from a live pool tree through a small reader: a
//     recording of one pool (`poolagent record`) and the daemon's rolling window
//     of every pool (`advise --pool`).
//
// # Observation: what the kernel and the daemon report
//
//   - observe: parsers of what the kernel reports (cpu.stat, PSI, memory,
//     /proc/stat), as values, and of what the throttling models assume of
//     the host (sched_ext, CFS bandwidth control, the kernel's release and
//     tick), and the table `poolagent stat` prints of them; it never writes
//     a cgroup file.
//   - internal/sysview: the host's version of YDB's system views (pools, classifiers,
//     queries) as tables and JSON.
//   - internal/metrics: the daemon's pools for Prometheus.
//
// # Service: the programs and how they run
//
//   - cmd/poolagent: the command-line interface, the only place flags are
//     declared: a file per command (a large one split by what it wires, as
//     daemon_open.go), each at most 150 lines, and the framework's
//     plumbing (usage errors, help, the manual page) in files of their own.
//   - cmd/poolagent-run: the slim client.
//   - cmd/poolagent-oci, internal/oci: the OCI runtime that puts containers
//     in pools: runc's and crun's command lines, a container's config.json
//     rewritten to place it below its query cgroup, the wait in the queue
//     before the real runtime runs.
//   - internal/service: the daemon as a system service: signals, reloads, the
//     metrics endpoint, readiness and the watchdog.
//   - internal/systemd: the notify protocol and the delegated cgroup layout.
//   - internal/guard, internal/handover, internal/version, internal/suggest:
//     an accept loop that survives running out of descriptors, `poolagent
//     run` handed over to poolagent-run, the build's version, the nearest
//     name for a mistyped command or flag, or DDL parameter.
//   - internal/tell: a message written to a descriptor a user handed the
//     daemon by a process of that user's, never by a daemon thread.
//   - internal/pidfd: waiting for a process to exit without a thread (the
//     runtime's poller on its pidfd).
//   - internal/reread: the cgroup counter files read each interval, kept
//     open and read again with pread(2) instead of opened each time.
//   - internal/kerneltest, internal/etcdtest (with its member,
//     internal/etcdtest/etcd-member), internal/burn, internal/browsertest:
//     what the tests share: real-kernel gates and cgroups, real etcd
//     clusters, CPU burners, reports rendered in headless Chromium.
//   - scripts/benchstart (with scripts/benchstart/goexec): the benchmark of
//     a query's start against cgexec, and against another build's
//     (docs/performance.md).
//
// The walls between them, each holding today: planner,
// simulate and admission import no package that does I/O (cpulimit,
// planner, protocol and observe's value types only); observe imports no
// writer; cgroupfs knows no daemon; client imports only protocol,
// internal/version and internal/suggest, never daemon, planner or simulate.
package poolagent
