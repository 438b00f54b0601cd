package daemon

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/client"
)

// TestKernelServiceStop: a service's client (RunOptions.Unit) passes the
// SIGTERM systemd sends it to every process of its query, the command's
// child too: the run ends, by that signal, only once the query cgroup is
// empty, which the child sleeping for ten minutes would otherwise keep
// populated.
func TestKernelServiceStop(t *testing.T) {
	d, cg := kernelDaemon(t, bothModes, Config{}, "CREATE RESOURCE POOL etl;", rootIdentity)
	started := t.TempDir() + "/child"
	sigs := make(chan os.Signal, 1)
	type outcome struct {
		res client.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := client.Run(client.RunOptions{Socket: d.socket, Pool: "etl", Unit: true, Signals: sigs, Env: os.Environ(),
			Args:   []string{"/bin/sh", "-c", `sleep 600 & echo $! >"$1"; wait`, "job", started},
			Stdout: os.Stdout, Stderr: os.Stderr})
		done <- outcome{res, err}
	}()
	waitFor(t, "the command's child to start", func() bool {
		b, err := os.ReadFile(started)
		return err == nil && len(b) > 0 && b[len(b)-1] == '\n'
	})
	sigs <- syscall.SIGTERM
	select {
	case o := <-done:
		if o.err != nil || o.res.Signal != syscall.SIGTERM || o.res.ExitCode != 128+int(syscall.SIGTERM) {
			t.Fatalf("run: %+v, %v; want ended by SIGTERM", o.res, o.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not end within a minute of SIGTERM: the signal did not reach every process of the query")
	}
	waitFor(t, "no query left", func() bool { return queriesLeft(t, cg)() == 0 })
}
