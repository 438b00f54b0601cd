package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	unitFile   = "../../scripts/poolagent.service"
	socketFile = "../../scripts/poolagent.socket"
)

// requireTool finds a program the test needs; in CI
// (POOLAGENT_REQUIRE_KERNEL=1, whose test script installs it) a missing one
// is a failure.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("POOLAGENT_REQUIRE_KERNEL") == "1" {
		t.Fatalf("%s not found (scripts/test.sh installs it): %v", name, err)
	}
	t.Skipf("%s not found: %v", name, err)
	return ""
}

// unitSettings reads the service unit's Key=Value lines, section-qualified.
func unitSettings(t *testing.T) map[string][]string {
	t.Helper()
	return settingsOf(t, unitFile)
}

// settingsOf reads a unit file's Key=Value lines, section-qualified.
func settingsOf(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, _ := strings.Cut(line, "=")
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// TestUnitSettings pins the settings the daemon's behaviour depends on:
// notify protocol, watchdog, delegation, a stop that leaves running queries
// alone, the directories, and hardening that still allows cgroup writes.
func TestUnitSettings(t *testing.T) {
	s := unitSettings(t)
	want := map[string]string{
		"Service.Type":                   "notify",
		"Service.NotifyAccess":           "main",
		"Service.ExecReload":             "/bin/kill -HUP $MAINPID",
		"Service.KillMode":               "process",
		"Service.RuntimeDirectory":       "poolagent",
		"Service.RuntimeDirectoryMode":   "0755",
		"Service.StateDirectory":         "poolagent",
		"Service.ConfigurationDirectory": "poolagent",
		"Service.ProtectSystem":          "strict",
		"Service.ReadWritePaths":         "/sys/fs/cgroup",
		"Service.NoNewPrivileges":        "yes",
	}
	for k, v := range want {
		if got := s[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"Service.ProtectControlGroups", "Service.ProtectKernelTunables"} {
		if _, ok := s[k]; ok {
			t.Errorf("%s makes /sys/fs/cgroup read-only: the daemon could not write its pools", k)
		}
	}
	// The pools are in a scope of their own (Delegate); the unit's cgroup
	// holds the daemon alone, so systemd can always start it there.
	for _, k := range []string{"Service.Delegate", "Service.DelegateSubgroup"} {
		if _, ok := s[k]; ok {
			t.Errorf("%s: the daemon's unit delegates nothing (the pools are in poolagent-pools.scope)", k)
		}
	}
	if got := s["Service.WatchdogSec"]; len(got) != 1 || got[0] == "0" {
		t.Errorf("WatchdogSec = %q, want a watchdog", got)
	}
	exec := strings.Join(s["Service.ExecStart"], " ")
	for _, flag := range []string{"daemon", "--pools /etc/poolagent/pools.sql", "--delegated", "--state-dir /var/lib/poolagent", "--socket /run/poolagent/agent.sock"} {
		if !strings.Contains(exec, flag) {
			t.Errorf("ExecStart %q lacks %q", exec, flag)
		}
	}
}

// TestSocketUnit pins socket activation: the socket unit listens where the
// daemon's --socket says, for every user, and the service needs it and
// keeps its directory across restarts.
func TestSocketUnit(t *testing.T) {
	sock, svc := settingsOf(t, socketFile), unitSettings(t)
	exec := strings.Join(svc["Service.ExecStart"], " ")
	if got := sock["Socket.ListenStream"]; len(got) != 1 || !strings.Contains(exec, "--socket "+got[0]) {
		t.Errorf("ListenStream = %q, not the --socket of ExecStart %q", got, exec)
	}
	for k, v := range map[string]string{"Socket.SocketMode": "0666", "Socket.Service": "poolagent.service", "Install.WantedBy": "sockets.target"} {
		if got := sock[k]; len(got) != 1 || got[0] != v {
			t.Errorf("poolagent.socket %s = %q, want %q", k, got, v)
		}
	}
	for k, v := range map[string]string{"Unit.Requires": "poolagent.socket", "Service.RuntimeDirectoryPreserve": "yes", "Install.Also": "poolagent.socket"} {
		if got := svc[k]; len(got) != 1 || got[0] != v {
			t.Errorf("poolagent.service %s = %q, want %q", k, got, v)
		}
	}
}

// TestUnitVerifies runs systemd-analyze verify on the units, with ExecStart
// pointing at an executable that exists (verify checks it); nothing may be
// reported.
func TestUnitVerifies(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze")
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "poolagent.service")
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/poolagent", self)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	socket, err := os.ReadFile(socketFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "poolagent.socket"), socket, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "poolagent.socket"), path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}

// systemdVersion reads "systemd 252 (252.38-1~deb12u1)".
func systemdVersion(t *testing.T, analyze string) int {
	t.Helper()
	out, err := exec.Command(analyze, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^systemd (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze --version: %q", out)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// TestInstallScripts stages an install with scripts/install.sh (DESTDIR:
// files only, no systemctl), which builds nothing here (POOLAGENT_BINARY,
// POOLAGENT_RUN_BINARY, POOLAGENT_OCI_BINARY), verifies the unit and checks the pool file with
// the installed binary; then removes it with scripts/uninstall.sh.
func TestInstallScripts(t *testing.T) {
	requireTool(t, "systemd-analyze")
	gobin := requireTool(t, "go")
	dir := t.TempDir()
	bin, runBin, ociBin := filepath.Join(dir, "poolagent"), filepath.Join(dir, "poolagent-run"), filepath.Join(dir, "poolagent-oci")
	for b, pkg := range map[string]string{bin: "../../cmd/poolagent", runBin: "../../cmd/poolagent-run", ociBin: "../../cmd/poolagent-oci"} {
		if out, err := exec.Command(gobin, "build", "-o", b, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	stage := filepath.Join(dir, "stage")
	run := func(script string, args ...string) string {
		t.Helper()
		cmd := exec.Command("../../scripts/"+script, args...)
		cmd.Env = append(os.Environ(), "DESTDIR="+stage, "POOLAGENT_BINARY="+bin, "POOLAGENT_RUN_BINARY="+runBin, "POOLAGENT_OCI_BINARY="+ociBin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", script, args, err, out)
		}
		return string(out)
	}
	if out := run("install.sh", "--help"); !strings.Contains(out, "--no-service") || !strings.Contains(out, "DESTDIR=DIR") {
		t.Errorf("install.sh --help does not list --no-service and DESTDIR:\n%s", out)
	}
	if _, err := os.Stat(stage); !os.IsNotExist(err) {
		t.Errorf("install.sh --help wrote %s (%v)", stage, err)
	}
	run("install.sh", "--no-service")
	if _, err := os.Stat(filepath.Join(stage, "etc")); !os.IsNotExist(err) {
		t.Errorf("install.sh --no-service wrote etc/ (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(stage, "usr/local/bin/poolagent-run")); err != nil {
		t.Errorf("install.sh --no-service: %v", err)
	}
	run("install.sh")
	unit, err := os.ReadFile(filepath.Join(stage, "etc/systemd/system/poolagent.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/poolagent daemon") || strings.Contains(string(unit), stage) {
		t.Errorf("installed unit's ExecStart is not /usr/local/bin/poolagent:\n%s", unit)
	}
	for _, f := range []string{"usr/local/bin/poolagent", "usr/local/bin/poolagent-run", "usr/local/bin/poolagent-oci"} {
		if info, err := os.Stat(filepath.Join(stage, f)); err != nil || info.Mode().Perm() != 0o755 {
			t.Errorf("installed binary %s: %v %v", f, info, err)
		}
	}
	for f, want := range map[string]string{
		"etc/systemd/system/poolagent.socket":                   "ListenStream=/run/poolagent/agent.sock",
		"usr/local/share/man/man1/poolagent.1":                  ".TH POOLAGENT 1",
		"usr/local/share/man/man1/poolagent-run.1":              ".TH POOLAGENT\\-RUN 1",
		"usr/local/share/man/man1/poolagent-oci.1":              ".TH POOLAGENT\\-OCI 1",
		"usr/local/share/bash-completion/completions/poolagent": "complete -o bashdefault -o default -F _poolagent poolagent",
		"usr/local/share/zsh/site-functions/_poolagent":         "#compdef poolagent",
		"usr/local/share/poolagent/poolagent.rules.yml":         "groups:",
		"usr/local/share/poolagent/poolagent.dashboard.json":    "\"panels\"",
	} {
		if got, err := os.ReadFile(filepath.Join(stage, f)); err != nil || !strings.Contains(string(got), want) {
			t.Errorf("installed %s: %v, want it to hold %q", f, err, want)
		}
	}
	pools := filepath.Join(stage, "etc/poolagent/pools.sql")
	mine := []byte("CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=2);\n")
	if err := os.WriteFile(pools, mine, 0o644); err != nil {
		t.Fatal(err)
	}
	run("install.sh")
	if got, _ := os.ReadFile(pools); string(got) != string(mine) {
		t.Errorf("a second install overwrote the pool file: %q", got)
	}
	run("uninstall.sh")
	for _, f := range []string{"usr/local/bin/poolagent", "usr/local/bin/poolagent-run", "etc/systemd/system/poolagent.service",
		"etc/systemd/system/poolagent.socket", "usr/local/share/man/man1/poolagent.1", "usr/local/share/man/man1/poolagent-run.1",
		"usr/local/share/man/man1/poolagent-oci.1", "usr/local/share/bash-completion/completions/poolagent",
		"usr/local/share/zsh/site-functions/_poolagent", "usr/local/share/poolagent/poolagent.rules.yml",
		"usr/local/share/poolagent/poolagent.dashboard.json", "usr/local/share/poolagent"} {
		if _, err := os.Stat(filepath.Join(stage, f)); !os.IsNotExist(err) {
			t.Errorf("%s left after uninstall (%v)", f, err)
		}
	}
	if _, err := os.Stat(pools); err != nil {
		t.Errorf("uninstall without --purge removed the pool file: %v", err)
	}
	run("uninstall.sh", "--purge")
	if _, err := os.Stat(filepath.Join(stage, "etc/poolagent")); !os.IsNotExist(err) {
		t.Errorf("/etc/poolagent left after --purge (%v)", err)
	}
}
