package state

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writerEnv makes the test binary a change writer instead of a test run:
// its value is the state directory to append to, forever.
const writerEnv = "POOLAGENT_STATE_TEST_WRITER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		runWriter(dir)
		return
	}
	os.Exit(m.Run())
}

// changeDDL is the DDL of change seq; it is long enough that a rewrite of
// the log takes a while, so kills land inside writes.
func changeDDL(seq uint64) string {
	return fmt.Sprintf("ALTER RESOURCE POOL p%d SET (QUEUE_SIZE=%d); -- %s", seq%7, seq, strings.Repeat("x", 200))
}

// runWriter appends changes to the log in dir until it is killed, printing
// "acked SEQ" after each Append returned, i.e. once the change is durable.
func runWriter(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	for seq := uint64(len(s.Changes())) + 1; ; seq++ {
		c, err := s.Append(Change{UID: 0, DDL: changeDDL(seq)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "acked %d\n", c.Seq)
		out.Flush()
	}
}

// TestKillDuringChangesLeavesPrefix kills a writer process with SIGKILL at
// random moments while it appends changes, restarts it from the state on
// disk, and checks after each kill that the log is exactly changes
// 1..n with n between the last acknowledged change and one more (the write
// in flight), never a torn or reordered file.
func TestKillDuringChangesLeavesPrefix(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	var acked uint64
	killedMidWrite := 0
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan uint64, 1<<16)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				seq, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "acked "), 10, 64)
				if err == nil {
					lines <- seq
				}
			}
		}()
		// Odd rounds kill anywhere from the start (Open included); even
		// rounds once the writer has acknowledged a change, so that the
		// stream advances however slowly the machine starts processes.
		var first []uint64
		if round%2 == 0 {
			if seq, ok := <-lines; ok {
				first = append(first, seq)
			}
		}
		time.Sleep(time.Duration(rng.IntN(20_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		check := func(seq uint64) {
			if seq != acked+1 {
				t.Fatalf("round %d: writer acknowledged %d after %d", round, seq, acked)
			}
			acked = seq
		}
		for _, seq := range first {
			check(seq)
		}
		for seq := range lines {
			check(seq)
		}
		cmd.Wait()

		if temps, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(temps) > 0 {
			killedMidWrite++
		}
		changes, err := Read(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatalf("round %d: log unreadable after kill: %v", round, err)
		}
		n := uint64(len(changes))
		if n < acked || n > acked+1 {
			t.Fatalf("round %d: log holds %d changes, acknowledged %d (want %d or %d)", round, n, acked, acked, acked+1)
		}
		for i, c := range changes {
			if c.DDL != changeDDL(uint64(i)+1) {
				t.Fatalf("round %d: change %d is %q, want %q", round, i+1, c.DDL, changeDDL(uint64(i)+1))
			}
		}
		// The write in flight may have landed; the next writer starts after it.
		acked = n
	}
	t.Logf("%d rounds, %d changes, %d kills left a temporary file", rounds, acked, killedMidWrite)
	if acked < uint64(rounds)/2 {
		t.Fatalf("%d changes in %d rounds: the writer did not get to write", acked, rounds)
	}
}
