package oci

import (
	"fmt"
	"slices"
	"strings"
)

// Invocation is one command line of an OCI runtime as poolagent-oci was
// given it: runc's or crun's global options, the subcommand and its
// arguments, and poolagent-oci's own --runtime-path.
type Invocation struct {
	// RuntimePath is poolagent-oci's --runtime-path: the runtime to run;
	// "" looks up runc, then crun, on PATH.
	RuntimePath string
	// Global are the runtime's global options, in their order, without
	// --systemd-cgroup and with crun's --cgroup-manager=systemd made
	// cgroupfs: a placed container's cgroup is a path of poolagent's, and
	// every later subcommand must see the container as created.
	Global []string
	// Command is the subcommand ("create", "run", "kill", ...); "" when
	// none was given (--version, --help).
	Command string
	// Args are the subcommand's arguments, as given.
	Args []string
	// For create and run: Bundle is the bundle directory ("" for the
	// current directory), Config the config file crun's --config names
	// ("" for config.json in the bundle), ID the container's id and
	// Detach whether run was asked to detach (-d, --detach).
	Bundle, Config, ID string
	Detach             bool
}

// Places reports whether the subcommand creates a container: create and
// run wait in the queue and are placed; every other subcommand passes
// straight through.
func (inv Invocation) Places() bool { return inv.Command == "create" || inv.Command == "run" }

// WantsHelp reports whether poolagent-oci's own help was asked for:
// --help or -h with no subcommand after it (a subcommand's --help is the
// runtime's).
func (inv Invocation) WantsHelp() bool {
	return inv.Command == "" && (slices.Contains(inv.Global, "--help") || slices.Contains(inv.Global, "-h"))
}

// RuntimeArgs are the arguments the runtime is run with, after its name.
func (inv Invocation) RuntimeArgs() []string {
	out := append([]string{}, inv.Global...)
	if inv.Command != "" {
		out = append(out, inv.Command)
	}
	return append(out, inv.Args...)
}

// Global options of runc and crun that take a value; the others (--debug,
// --systemd-cgroup, --help, --version) take none.
var globalValued = map[string]bool{
	"--log": true, "--log-format": true, "--log-level": true, "--root": true,
	"--criu": true, "--rootless": true, "--cgroup-manager": true,
}

// Options of create and run that take a value, in both runtimes'
// spellings; the rest (-d, --detach, --no-pivot, --no-new-keyring,
// --no-subreaper, --keep) take none.
var createValued = map[string]bool{
	"-b": true, "--bundle": true, "-f": true, "--config": true,
	"--console-socket": true, "--pid-file": true, "--pidfd-socket": true,
	"--preserve-fds": true,
}

// Parse reads an OCI runtime's command line (without the program's name):
// global options before the subcommand, as runc and crun take them, each
// as "--opt value" or "--opt=value". An option it does not know is passed
// on as taking no value. For create and run it also reads the bundle, the
// config file, the container id and -d; a create or run without exactly
// one container id is refused, since nothing could be placed.
func Parse(args []string) (Invocation, error) {
	var inv Invocation
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		if name == "--runtime-path" {
			if !hasValue {
				if i+1 >= len(args) {
					return inv, fmt.Errorf("--runtime-path needs a value: the path of runc or crun")
				}
				i++
				value = args[i]
			}
			if value == "" {
				return inv, fmt.Errorf("--runtime-path is empty: give the path of runc or crun")
			}
			inv.RuntimePath = value
			continue
		}
		opt := []string{a}
		if globalValued[name] && !hasValue {
			if i+1 >= len(args) {
				return inv, fmt.Errorf("global option %s needs a value", name)
			}
			i++
			value = args[i]
			opt = append(opt, value)
		}
		switch {
		case name == "--systemd-cgroup":
			continue
		case name == "--cgroup-manager" && value == "systemd":
			opt = []string{"--cgroup-manager=cgroupfs"}
		}
		inv.Global = append(inv.Global, opt...)
	}
	if i < len(args) && args[i] == "--" {
		inv.Global = append(inv.Global, "--")
		i++
	}
	if i == len(args) {
		return inv, nil
	}
	inv.Command, inv.Args = args[i], args[i+1:]
	if !inv.Places() {
		return inv, nil
	}
	return inv, inv.parseCreate()
}

// parseCreate reads create's and run's options and container id.
func (inv *Invocation) parseCreate() error {
	var ids []string
	args := inv.Args
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			ids = append(ids, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			ids = append(ids, a)
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		// crun's short options take their value in the same word too:
		// -b/path, -fconfig.json.
		if !hasValue && len(a) > 2 && a[1] != '-' && createValued[a[:2]] {
			name, value, hasValue = a[:2], a[2:], true
		}
		if createValued[name] && !hasValue {
			if i+1 >= len(args) {
				return fmt.Errorf("%s %s needs a value", inv.Command, name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "-b", "--bundle":
			inv.Bundle = value
		case "-f", "--config":
			inv.Config = value
		case "-d", "--detach":
			inv.Detach = true
		}
	}
	switch len(ids) {
	case 1:
		inv.ID = ids[0]
	case 0:
		return fmt.Errorf("%s: no container id given: want %s [OPTIONS] CONTAINER-ID", inv.Command, inv.Command)
	default:
		return fmt.Errorf("%s: %d container ids given (%s): want one; an option poolagent-oci does not know may have taken a value "+
			"(known with a value: --bundle/-b, --config/-f, --console-socket, --pid-file, --pidfd-socket, --preserve-fds)",
			inv.Command, len(ids), strings.Join(ids, " "))
	}
	if inv.ID == "" {
		return fmt.Errorf("%s: the container id is empty", inv.Command)
	}
	return nil
}
