package oci

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want Invocation
	}{
		{"podman's create with runc and the systemd driver",
			[]string{"--root", "/run/runc", "--log", "/var/log/c.json", "--log-format", "json", "--systemd-cgroup",
				"create", "--bundle", "/b", "--pid-file", "/b/pidfile", "--console-socket", "/tmp/cs", "abc"},
			Invocation{Global: []string{"--root", "/run/runc", "--log", "/var/log/c.json", "--log-format", "json"},
				Command: "create", Args: []string{"--bundle", "/b", "--pid-file", "/b/pidfile", "--console-socket", "/tmp/cs", "abc"},
				Bundle: "/b", ID: "abc"}},
		{"containerd's shim: values after =",
			[]string{"--root=/run/containerd/runc/default", "--log=/x/log.json", "--log-format=json", "--systemd-cgroup",
				"create", "--bundle=/b", "--pid-file=/b/init.pid", "c1"},
			Invocation{Global: []string{"--root=/run/containerd/runc/default", "--log=/x/log.json", "--log-format=json"},
				Command: "create", Args: []string{"--bundle=/b", "--pid-file=/b/init.pid", "c1"}, Bundle: "/b", ID: "c1"}},
		{"crun: --cgroup-manager=systemd becomes cgroupfs, options after the id",
			[]string{"--cgroup-manager", "systemd", "--debug", "run", "c2", "-b", "/b", "-d", "--config", "other.json"},
			Invocation{Global: []string{"--cgroup-manager=cgroupfs", "--debug"}, Command: "run",
				Args: []string{"c2", "-b", "/b", "-d", "--config", "other.json"}, Bundle: "/b", Config: "other.json", ID: "c2", Detach: true}},
		{"crun's short options with their value in the word",
			[]string{"create", "-b/b", "-fc.json", "--no-pivot", "--preserve-fds", "2", "c3"},
			Invocation{Command: "create", Args: []string{"-b/b", "-fc.json", "--no-pivot", "--preserve-fds", "2", "c3"},
				Bundle: "/b", Config: "c.json", ID: "c3"}},
		{"run --detach, bundle the working directory",
			[]string{"run", "--detach", "--keep", "c4"},
			Invocation{Command: "run", Args: []string{"--detach", "--keep", "c4"}, ID: "c4", Detach: true}},
		{"our --runtime-path is taken out",
			[]string{"--runtime-path", "/usr/bin/crun", "--root", "/r", "kill", "c5", "KILL"},
			Invocation{RuntimePath: "/usr/bin/crun", Global: []string{"--root", "/r"}, Command: "kill", Args: []string{"c5", "KILL"}}},
		{"--runtime-path=", []string{"--runtime-path=runc", "state", "c6"},
			Invocation{RuntimePath: "runc", Command: "state", Args: []string{"c6"}}},
		{"other subcommands pass as they are, --systemd-cgroup dropped",
			[]string{"--systemd-cgroup", "delete", "--force", "c7"},
			Invocation{Command: "delete", Args: []string{"--force", "c7"}}},
		{"no subcommand", []string{"--version"}, Invocation{Global: []string{"--version"}}},
		{"an unknown global option passes as taking no value",
			[]string{"--new-flag", "--debug=true", "ps", "c8"},
			Invocation{Global: []string{"--new-flag", "--debug=true"}, Command: "ps", Args: []string{"c8"}}},
		{"the id after --", []string{"create", "-b", "/b", "--", "-odd"},
			Invocation{Command: "create", Args: []string{"-b", "/b", "--", "-odd"}, Bundle: "/b", ID: "-odd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(got, tc.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.args, got, tc.want)
			}
		})
	}
}

func equal(a, b Invocation) bool {
	return a.RuntimePath == b.RuntimePath && slices.Equal(a.Global, b.Global) && a.Command == b.Command &&
		slices.Equal(a.Args, b.Args) && a.Bundle == b.Bundle && a.Config == b.Config && a.ID == b.ID && a.Detach == b.Detach
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--bundle", "/b"}, "no container id given"},
		{[]string{"run", "--new-valued", "x", "c1"}, "2 container ids given (x c1)"},
		{[]string{"create", "--bundle"}, "--bundle needs a value"},
		{[]string{"--root"}, "global option --root needs a value"},
		{[]string{"--runtime-path"}, "--runtime-path needs a value"},
		{[]string{"--runtime-path="}, "--runtime-path is empty"},
		{[]string{"create", ""}, "the container id is empty"},
	} {
		_, err := Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestWantsHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--help"}, true},
		{[]string{"--root", "/r", "-h"}, true},
		{[]string{"--version"}, false},
		{[]string{"create", "--help", "c1"}, false},
		{[]string{"--help", "kill", "c1"}, false},
	} {
		inv, err := Parse(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := inv.WantsHelp(); got != tc.want {
			t.Errorf("Parse(%q).WantsHelp() = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestRuntimeArgs(t *testing.T) {
	inv, err := Parse([]string{"--systemd-cgroup", "--root", "/r", "create", "-b", "/b", "c1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--root", "/r", "create", "-b", "/b", "c1"}
	if got := inv.RuntimeArgs(); !slices.Equal(got, want) {
		t.Errorf("RuntimeArgs = %q, want %q", got, want)
	}
}
