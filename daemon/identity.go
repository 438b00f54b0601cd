package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/admission"
)

// peerCred returns the credentials the kernel recorded for the process
// that connected to conn (SO_PEERCRED: its pid and effective uid and gid
// at connect time).
func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: getsockopt SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// Users completes peer credentials with names from the host's user
// database.
type Users interface {
	Identity(cred *unix.Ucred) (admission.Identity, error)
}

// SystemUsers looks names up with os/user: through the C library's NSS
// (so LDAP or sssd users and groups count) when the binary is built with
// cgo, by reading /etc/passwd and /etc/group when it is not. The groups
// are the effective primary group and every group the database lists for
// the user (getgrouplist), looked up on every call so that membership
// changes apply to the next query.
type SystemUsers struct{}

// Identity implements Users. A uid without a user entry keeps an empty
// User and only its primary group; a gid without a group entry is left
// out of Groups.
func (SystemUsers) Identity(cred *unix.Ucred) (admission.Identity, error) {
	id := admission.Identity{UID: cred.Uid, GID: cred.Gid, PID: int(cred.Pid)}
	gids := []string{strconv.FormatUint(uint64(cred.Gid), 10)}
	u, err := user.LookupId(strconv.FormatUint(uint64(cred.Uid), 10))
	var unknown user.UnknownUserIdError
	switch {
	case errors.As(err, &unknown):
	case err != nil:
		return id, fmt.Errorf("look up uid %d: %w", cred.Uid, err)
	default:
		id.User = u.Username
		more, err := u.GroupIds()
		if err != nil {
			return id, fmt.Errorf("look up the groups of %s: %w", u.Username, err)
		}
		gids = append(gids, more...)
	}
	seen := map[string]bool{}
	for _, gid := range gids {
		if seen[gid] {
			continue
		}
		seen[gid] = true
		g, err := user.LookupGroupId(gid)
		var unknown user.UnknownGroupIdError
		switch {
		case errors.As(err, &unknown):
		case err != nil:
			return id, fmt.Errorf("look up gid %s: %w", gid, err)
		default:
			id.Groups = append(id.Groups, g.Name)
		}
	}
	return id, nil
}

// UserCache remembers identities for a short time, so a burst of queries
// from one user looks the user database up once (a lookup of a user's
// groups costs tens of microseconds with files, more with a directory
// service). A change of group membership applies to queries arriving
// after TTL.
type UserCache struct {
	users Users
	ttl   time.Duration

	mu      sync.Mutex
	entries map[[2]uint32]cachedIdentity
}

type cachedIdentity struct {
	id      admission.Identity
	expires time.Time
}

// NewUserCache caches what users returns for ttl.
func NewUserCache(users Users, ttl time.Duration) *UserCache {
	return &UserCache{users: users, ttl: ttl, entries: map[[2]uint32]cachedIdentity{}}
}

// Identity implements Users. The cached identity gets cred's PID.
func (c *UserCache) Identity(cred *unix.Ucred) (admission.Identity, error) {
	key := [2]uint32{cred.Uid, cred.Gid}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		id := e.id
		id.PID = int(cred.Pid)
		return id, nil
	}
	id, err := c.users.Identity(cred)
	if err != nil {
		return id, err
	}
	c.mu.Lock()
	if len(c.entries) > 4096 {
		clear(c.entries)
	}
	c.entries[key] = cachedIdentity{id: id, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return id, nil
}

// process is a stable reference to one process: a pidfd, which names the
// process itself and never another that later gets its pid, and the pid
// it has in the daemon's pid namespace.
type process struct {
	fd  int
	pid int
}

// peerProcess returns the connected client as a process: the kernel's
// pidfd of the peer (SO_PEERPIDFD, Linux 6.5) or, on older kernels, a
// pidfd opened for SO_PEERCRED's pid, checked to run as the peer's uid
// (that pid may have been recycled if the peer exited at once; the uid
// check keeps such a process from standing in for another user's). The
// caller closes fd.
func peerProcess(conn *net.UnixConn, cred *unix.Ucred, procRoot string) (process, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return process{}, fmt.Errorf("peer process: %w", err)
	}
	fd, optErr := -1, error(nil)
	if err := raw.Control(func(s uintptr) {
		fd, optErr = unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return process{}, fmt.Errorf("peer process: %w", err)
	}
	if optErr == nil {
		unix.CloseOnExec(fd)
		return process{fd: fd, pid: int(cred.Pid)}, nil
	}
	if !errors.Is(optErr, unix.ENOPROTOOPT) {
		return process{}, fmt.Errorf("peer process: getsockopt SO_PEERPIDFD: %w", optErr)
	}
	if fd, err = unix.PidfdOpen(int(cred.Pid), 0); err != nil {
		return process{}, fmt.Errorf("peer process %d: pidfd_open: %w", cred.Pid, err)
	}
	p := process{fd: fd, pid: int(cred.Pid)}
	if err := checkUID(procRoot, p, cred.Uid); err != nil {
		unix.Close(fd)
		return process{}, fmt.Errorf("peer process: %w", err)
	}
	return p, nil
}

// checkUID verifies that p's real and effective uid are uid.
func checkUID(procRoot string, p process, uid uint32) error {
	st, err := readStatus(procRoot, p.pid)
	if err != nil {
		return err
	}
	if err := alive(p); err != nil {
		return err
	}
	if st.ruid != uid || st.euid != uid {
		return fmt.Errorf("process %d runs as uid %d (effective %d), the client as %d", p.pid, st.ruid, st.euid, uid)
	}
	return nil
}

// pidfdProcess makes a process of a pidfd a client sent: its pid is the
// Pid line of the pidfd's /proc/self/fdinfo entry, which the kernel gives
// in the daemon's pid namespace, so a client in a pid namespace of its own
// names its process as well as any other. A descriptor that is not a
// pidfd, or whose process is gone, is refused.
func pidfdProcess(procRoot string, fd int) (process, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "self/fdinfo", strconv.Itoa(fd)))
	if err != nil {
		return process{}, fmt.Errorf("descriptor sent with start: %w", err)
	}
	pid, err := parsePidfdInfo(b)
	if err != nil {
		return process{}, fmt.Errorf("%w: the descriptor sent with start: %w", ErrNotYourChild, err)
	}
	return process{fd: fd, pid: pid}, nil
}

// parsePidfdInfo returns the pid in a pidfd's fdinfo, whose lines are
// "key:\tvalue" and include
//
//	Pid:	4242
//
// (the pid in the reader's pid namespace; 0 or -1 once the process is
// gone). Other descriptors have no Pid line.
func parsePidfdInfo(b []byte) (int, error) {
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "Pid:")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("fdinfo Pid %q: want a number", strings.TrimSpace(v))
		}
		if pid <= 0 {
			return 0, errors.New("its process has exited")
		}
		return pid, nil
	}
	return 0, errors.New("it is not a pidfd (its fdinfo has no Pid line)")
}

// maxReceivedFDs is how many descriptors one read of a client's messages
// accepts: the start request carries one pidfd; more are closed at once.
const maxReceivedFDs = 1

// fdReader reads a client's messages and keeps the last descriptor sent
// with them (SCM_RIGHTS), which the start request carries: its child's
// pidfd. Descriptors beyond maxReceivedFDs per read are closed by the
// kernel (MSG_CTRUNC), and a descriptor replaced by a later one is closed.
type fdReader struct {
	conn *net.UnixConn
	oob  []byte

	mu sync.Mutex
	fd int // -1: none
}

func newFDReader(conn *net.UnixConn) *fdReader {
	return &fdReader{conn: conn, oob: make([]byte, unix.CmsgSpace(4*maxReceivedFDs)), fd: -1}
}

// Read implements io.Reader.
func (r *fdReader) Read(p []byte) (int, error) {
	n, oobn, _, _, err := r.conn.ReadMsgUnix(p, r.oob)
	if oobn > 0 {
		r.keep(r.oob[:oobn])
	}
	// NOTE: ReadMsgUnix may return n = -1 with an error (a deadline);
	// io.Reader allows no negative count.
	return max(n, 0), err
}

// keep takes the descriptors out of control messages, keeping the last
// and closing the rest.
func (r *fdReader) keep(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			r.mu.Lock()
			if r.fd >= 0 {
				unix.Close(r.fd)
			}
			r.fd = fd
			r.mu.Unlock()
		}
	}
}

// take returns the descriptor last received, -1 if none, and forgets it:
// the caller closes it.
func (r *fdReader) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	fd := r.fd
	r.fd = -1
	return fd
}

// close closes a descriptor received and not taken.
func (r *fdReader) close() {
	if fd := r.take(); fd >= 0 {
		unix.Close(fd)
	}
}
