package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Killing a query: every process in its cgroup and below, including one
// forked while the kill runs.
//
//	v2 cgroup.kill    "1": the kernel kills the subtree at once, and a fork
//	                  racing with it fails (Linux 5.14+)
//	v2 cgroup.freeze  "1"/"0": freezes the subtree (Linux 5.2+)
//	v2 cgroup.events  "frozen 1" once every task is frozen
const (
	fileKill   = "cgroup.kill"
	fileFreeze = "cgroup.freeze"
	fileEvents = "cgroup.events"
)

// freezeWait bounds how long KillQuery waits for a subtree to freeze; a
// task in an uninterruptible sleep freezes only when it wakes.
const freezeWait = 10 * time.Second

// maxKillRounds bounds the rounds of v1's kill: each reads the cgroups'
// processes and kills them, and only a process forked between the read
// and the kill is left for the next.
const maxKillRounds = 100

// KillQuery kills every process in the query cgroup <pool>/<query> and
// below it with SIGKILL, so that no child forked during the kill
// survives: on v2 by writing cgroup.kill where the kernel has it, else by
// freezing the subtree (cgroup.freeze), killing every process while none
// can fork, and thawing it, which delivers the kills. On v1, whose pool
// tree has no freezer hierarchy, it kills in rounds until the cgroups
// are empty. The cgroups stay: the query's end removes them once empty.
// A query cgroup that does not exist is an error wrapping
// fs.ErrNotExist.
func (t *Tree) KillQuery(pool, query string) error {
	return t.killQuery(pool, query, true)
}

// killQuery is KillQuery; useKill false skips cgroup.kill, for the test
// of the freezer's way on a kernel that has both.
func (t *Tree) killQuery(pool, query string, useKill bool) error {
	cg, err := queryPath(pool, query)
	if err != nil {
		return err
	}
	f, err := t.fs(t.order[0])
	if err != nil {
		return err
	}
	if _, err := f.ReadDir(cg); err != nil {
		return fmt.Errorf("kill query %s: %w", cg, err)
	}
	if !t.v2 {
		return killRounds(f, cg)
	}
	if useKill {
		err := f.WriteFile(path.Join(cg, fileKill), "1")
		if !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return fmt.Errorf("kill query %s: %w", cg, err)
			}
			return nil
		}
	}
	return freezeKill(f, cg)
}

// freezeKill freezes cg, kills every process in it and below it, and
// thaws it; the thaw is written whatever happened before.
func freezeKill(f FS, cg string) (err error) {
	if err := f.WriteFile(path.Join(cg, fileFreeze), "1"); err != nil {
		return fmt.Errorf("kill query %s: freeze: %w", cg, err)
	}
	defer func() {
		if terr := f.WriteFile(path.Join(cg, fileFreeze), "0"); terr != nil {
			err = errors.Join(err, fmt.Errorf("kill query %s: thaw: %w", cg, terr))
		}
	}()
	for deadline := time.Now().Add(freezeWait); ; time.Sleep(time.Millisecond) {
		b, err := f.ReadFile(path.Join(cg, fileEvents))
		if err != nil {
			return fmt.Errorf("kill query %s: %w", cg, err)
		}
		if frozen(b) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill query %s: not frozen after %v (%s: %q)", cg, freezeWait, fileEvents, strings.TrimSpace(string(b)))
		}
	}
	_, err = killAll(f, cg)
	return err
}

// frozen reports whether cgroup.events says "frozen 1".
func frozen(events []byte) bool {
	for _, l := range strings.Split(string(events), "\n") {
		if strings.TrimSpace(l) == "frozen 1" {
			return true
		}
	}
	return false
}

// killRounds kills the processes of cg and below until none is left,
// at most maxKillRounds times, a millisecond apart (a killed process is
// listed until it has left).
func killRounds(f FS, cg string) error {
	for range maxKillRounds {
		n, err := killAll(f, cg)
		if err != nil || n == 0 {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("kill query %s: processes still there after %d rounds", cg, maxKillRounds)
}

// killAll sends SIGKILL to every process in cg and the cgroups below it
// and returns how many it found; one that is already gone (ESRCH) is not
// an error.
func killAll(f FS, cg string) (int, error) {
	pids, err := readProcs(f, cg)
	if err != nil {
		return 0, err
	}
	n := len(pids)
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return n, fmt.Errorf("kill process %d of query %s: %w", pid, cg, err)
		}
	}
	subs, err := f.ReadDir(cg)
	if err != nil {
		return n, err
	}
	for _, s := range subs {
		m, err := killAll(f, path.Join(cg, s))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
