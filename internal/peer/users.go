package peer

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
)

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
