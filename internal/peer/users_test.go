package peer

import (
	"os"
	"os/user"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
)

func TestSystemUsers(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skipf("no user database entry for this process: %v", err)
	}
	uid, _ := strconv.Atoi(me.Uid)
	gid, _ := strconv.Atoi(me.Gid)
	id, err := SystemUsers{}.Identity(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(uid), Gid: uint32(gid)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(me.Gid)
	if err != nil {
		t.Fatal(err)
	}
	if id.User != me.Username || !slices.Contains(id.Groups, g.Name) || id.PID != os.Getpid() {
		t.Errorf("identity %+v, want user %s with group %s", id, me.Username, g.Name)
	}
	// A uid and gid without entries: no names, no error.
	id, err = SystemUsers{}.Identity(&unix.Ucred{Uid: 3999999999, Gid: 3999999999})
	if err != nil || id.User != "" || len(id.Groups) != 0 {
		t.Errorf("unknown ids: %+v, %v; want no names", id, err)
	}
}

// countingUsers counts lookups and names every caller "u<uid>".
type countingUsers struct{ n int }

func (c *countingUsers) Identity(cred *unix.Ucred) (admission.Identity, error) {
	c.n++
	return admission.Identity{UID: cred.Uid, GID: cred.Gid, PID: int(cred.Pid), User: "u" + strconv.Itoa(int(cred.Uid))}, nil
}

func TestUserCache(t *testing.T) {
	inner := &countingUsers{}
	c := NewUserCache(inner, 50*time.Millisecond)
	a, _ := c.Identity(&unix.Ucred{Pid: 10, Uid: 1000, Gid: 1000})
	b, _ := c.Identity(&unix.Ucred{Pid: 11, Uid: 1000, Gid: 1000})
	if inner.n != 1 || a.PID != 10 || b.PID != 11 || b.User != "u1000" {
		t.Fatalf("lookups %d, identities %+v %+v; want one lookup, each with its own pid", inner.n, a, b)
	}
	c.Identity(&unix.Ucred{Pid: 12, Uid: 1000, Gid: 2000})
	if inner.n != 2 {
		t.Errorf("another primary group shared the cached identity")
	}
	time.Sleep(60 * time.Millisecond)
	c.Identity(&unix.Ucred{Pid: 13, Uid: 1000, Gid: 1000})
	if inner.n != 3 {
		t.Errorf("lookups %d after the TTL, want 3", inner.n)
	}
}
