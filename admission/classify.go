package admission

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// AllUsers is the member that every caller matches (YDB's well-known group).
const AllUsers = "all-users@well-known"

// ErrAccessDenied: the caller may not use the pool they named.
var ErrAccessDenied = errors.New("access denied")

// Identity is who starts a query. UID, GID and PID come from the kernel
// (the socket's peer credentials, never from what the client says); User
// and Groups are names from the host's user database.
type Identity struct {
	UID  uint32
	GID  uint32 // effective primary group
	PID  int
	User string // login name; "" when the user database has no entry
	// Groups are the primary group's name and every supplementary group
	// the user database lists for User.
	Groups []string
}

// String names the caller for messages: "alice (uid 1001)".
func (id Identity) String() string {
	if id.User == "" {
		return fmt.Sprintf("uid %d", id.UID)
	}
	return fmt.Sprintf("%s (uid %d)", id.User, id.UID)
}

// Is reports whether member names this caller: their user name, one of
// their groups, or AllUsers.
func (id Identity) Is(member string) bool {
	return member == AllUsers || (id.User != "" && member == id.User) || slices.Contains(id.Groups, member)
}

// Classifier is a resource pool classifier: callers matching Member go to
// Pool; the lowest Rank wins.
type Classifier struct {
	Name   string
	Pool   string
	Member string
	Rank   int64
}

// Rules are what classification and access need from the pool model.
type Rules struct {
	// Pools are the names of the pools that exist, default included.
	Pools []string
	// Classifiers in any order; ranks are unique.
	Classifiers []Classifier
	// Users maps a pool to the members granted its use. The default pool
	// needs no grant.
	Users map[string][]string
	// Admins are the members with administrator rights besides root: the
	// configured admin group and grantees of administration.
	Admins []string
}

// Placement is where a query goes and why.
type Placement struct {
	Pool string
	// Classifier is the name of the classifier that chose the pool; ""
	// when the caller named the pool or no classifier matched.
	Classifier string
}

// IsAdmin reports whether id may change pools and classifiers: root, or a
// member of Admins.
func (r Rules) IsAdmin(id Identity) bool {
	return id.UID == 0 || slices.ContainsFunc(r.Admins, id.Is)
}

// CanUse reports whether id may run queries in pool: the default pool is
// open to everyone, administrators may use every pool, anyone else needs a
// grant to themselves, one of their groups or AllUsers.
func (r Rules) CanUse(id Identity, pool string) bool {
	return pool == DefaultPool || r.IsAdmin(id) || slices.ContainsFunc(r.Users[pool], id.Is)
}

func (r Rules) exists(pool string) bool { return slices.Contains(r.Pools, pool) }

// Classify places a query. A named pool must exist and be usable by id;
// otherwise the error says which pool refused the caller and why. Without
// a name, classifiers are tried by rank, lowest first, skipping those whose
// pool is missing or not usable by id; no match places the query in the
// default pool.
func (r Rules) Classify(id Identity, named string) (Placement, error) {
	if named != "" {
		if !r.exists(named) {
			return Placement{}, fmt.Errorf("%w: resource pool %q does not exist (pools: %s)",
				ErrUnknownPool, named, strings.Join(r.Pools, ", "))
		}
		if !r.CanUse(id, named) {
			return Placement{}, fmt.Errorf("%w: resource pool %q refused %s: no grant to use it for the user, "+
				"their groups (%s) or %s; an administrator can grant it", ErrAccessDenied, named, id,
				strings.Join(id.Groups, ", "), AllUsers)
		}
		return Placement{Pool: named}, nil
	}
	byRank := slices.Clone(r.Classifiers)
	slices.SortFunc(byRank, func(a, b Classifier) int { return cmp.Compare(a.Rank, b.Rank) })
	for _, c := range byRank {
		if id.Is(c.Member) && r.exists(c.Pool) && r.CanUse(id, c.Pool) {
			return Placement{Pool: c.Pool, Classifier: c.Name}, nil
		}
	}
	return Placement{Pool: DefaultPool}, nil
}
