package oci

// Summary is poolagent-oci's one-line summary, ArgsUsage its arguments
// and Help its description with its options: `poolagent-oci --help` prints
// them and `poolagent man poolagent-oci` makes poolagent-oci(1) of them.
const (
	Summary   = "an OCI runtime that puts containers in resource pools, in front of runc or crun"
	ArgsUsage = "[--runtime-path PATH] [RUNTIME-OPTIONS...] COMMAND [ARGS...]"
	Help      = "Container engines (podman, Docker, containerd and so Kubernetes, CRI-O) call it with runc's\n" +
		"command line instead of runc or crun. On create and run it reads the bundle's config.json,\n" +
		"picks the container's pool (the annotation io.poolagent.pool, else the pool classifiers with\n" +
		"the container's name as its app name and the calling uid as the member, else default) and\n" +
		"waits in the pool's queue like any query: a refusal is YDB's text on standard error and\n" +
		"exit status 125. Once admitted, it sets the container's linux.cgroupsPath to a leaf below the\n" +
		"query cgroup the daemon made (the pool's per-query limits hold there), copies those limits\n" +
		"into linux.resources and POOLAGENT_CPU_LIMIT into the process's environment, and runs the\n" +
		"real runtime. The query holds its slot until the container's cgroup is empty, past\n" +
		"poolagent-oci's own exit for a container created or run detached. Every other subcommand\n" +
		"(start, kill, delete, state, exec, ...) goes straight to the runtime (execve). runc's\n" +
		"--systemd-cgroup and crun's --cgroup-manager=systemd are dropped on every subcommand: the\n" +
		"container's cgroup is poolagent's.\n" +
		"\n" +
		"When the kernel's OOM killer ends a process of the container at its query's or its pool's\n" +
		"memory limit, the daemon's log says so; for run without --detach, a line on standard error\n" +
		"too. Containers are placed on cgroup v2 only, by a runtime run as root (a rootless engine is\n" +
		"refused). A malformed config.json, an unknown io.poolagent.* annotation or the daemon not\n" +
		"running is refused before anything starts. See docs/containers.md.\n" +
		"\n" +
		"Options:\n" +
		"  --runtime-path PATH   the runtime to run (a path, or a name looked up on PATH); without\n" +
		"                        it runc, then crun, on PATH\n" +
		"  --help, -h            this help, when no COMMAND follows (the runtime's is RUNTIME --help)\n" +
		"  RUNTIME-OPTIONS       runc's and crun's global options (--root, --log, --log-format,\n" +
		"                        --debug, ...), passed on\n" +
		"\n" +
		"Environment:\n" +
		"  POOLAGENT_SOCKET      the daemon's socket (default /run/poolagent/agent.sock)"
)
