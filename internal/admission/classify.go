package admission

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/planner"
)

// ErrAccessDenied: the caller may not use the pool they named.
var ErrAccessDenied = errors.New("access denied")

// ErrRejected: a classifier with ACTION='reject' matched the query.
var ErrRejected = errors.New("rejected by classifier")

// RejectedError is a query refused by an ACTION='reject' classifier. Its
// text is YDB's: "Request is rejected by classifier '<name>' (rank=<rank>)".
type RejectedError struct {
	Classifier planner.Classifier
}

func (e *RejectedError) Error() string { return e.Classifier.RejectMessage() }

// Unwrap returns ErrRejected.
func (e *RejectedError) Unwrap() error { return ErrRejected }

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

// UserKey names the caller in a pool's per-user limits and fair order:
// the login name, so that one person is one user on every node of a
// fleet, or "uid N" when the user database has no name for the uid.
func (id Identity) UserKey() string {
	if id.User == "" {
		return fmt.Sprintf("uid %d", id.UID)
	}
	return id.User
}

// account is the names id is matched by in classifiers and GRANTs.
func (id Identity) account() planner.Account {
	return planner.Account{User: id.User, Groups: id.Groups}
}

// Access is classification and access control over the pool model: its
// classifiers and GRANTs, plus the host's own administrators, root and
// the members of AdminGroup.
type Access struct {
	Model *planner.Model
	// AdminGroup is a Unix group whose members administer the pools
	// besides root; "" for none.
	AdminGroup string
}

// Placement is where a query goes and why.
type Placement struct {
	Pool string
	// Classifier is the name of the classifier that chose the pool; ""
	// when the caller named the pool or no classifier matched.
	Classifier string
}

// IsAdmin reports whether id may create, alter and drop pools and
// classifiers and change grants: root, a member of AdminGroup, or a
// holder of an administration grant in the model.
func (a Access) IsAdmin(id Identity) bool {
	return id.UID == 0 ||
		(a.AdminGroup != "" && slices.Contains(id.Groups, a.AdminGroup)) ||
		a.Model.IsAdmin(id.account())
}

// CanUse reports whether id may run queries in pool: the pool exists and
// id holds a use grant for it (everyone may use default), or id is an
// administrator.
func (a Access) CanUse(id Identity, pool string) bool {
	if _, ok := a.Model.Pool(pool); !ok {
		return false
	}
	return a.Model.MayUse(id.account(), pool) || a.IsAdmin(id)
}

// Classify places a query. A pool the caller names must exist and be
// usable by them; otherwise the error says which pool refused them and
// why. Without a name, the model's classifiers decide by rank, lowest
// first: the first whose predicates all hold (MEMBER_NAME includes the
// caller, HAS_APP_NAME equals app) either refuses the query
// (ACTION='reject': a *RejectedError) or places it in its pool, skipping
// those whose pool is missing or not granted to the caller (grants only:
// administrators name a pool to use one they hold no grant for); no match
// places the query in default. app is the application name the client
// gives, the base name of its command's executable; nothing checks it.
func (a Access) Classify(id Identity, named, app string) (Placement, error) {
	if named == "" {
		c, ok := a.Model.Classify(planner.Query{Account: id.account(), AppName: app})
		switch {
		case !ok:
			return Placement{Pool: planner.DefaultPool}, nil
		case c.Action == planner.ActionReject:
			return Placement{}, &RejectedError{Classifier: c}
		}
		return Placement{Pool: c.ResourcePool, Classifier: c.Name}, nil
	}
	if _, ok := a.Model.Pool(named); !ok {
		var names []string
		for _, p := range a.Model.Pools() {
			names = append(names, p.Name)
		}
		return Placement{}, fmt.Errorf("%w: resource pool %q does not exist (pools: %s)",
			ErrUnknownPool, named, strings.Join(names, ", "))
	}
	if !a.CanUse(id, named) {
		// A uid without a user entry can only be granted through a group.
		to := id.User
		if to == "" {
			to = "'%GROUP'"
		}
		return Placement{}, fmt.Errorf("%w: resource pool %q refused %s: no grant to use it for the user, "+
			"their groups (%s) or %s; an administrator can run GRANT USE ON RESOURCE POOL %s TO %s",
			ErrAccessDenied, named, id, strings.Join(id.Groups, ", "), planner.AllUsers, named, to)
	}
	return Placement{Pool: named}, nil
}
