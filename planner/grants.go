package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Right is what a grant allows on a host.
type Right uint8

const (
	// RightUse lets a member run queries in a pool (YDB: SELECT ROW on
	// the pool).
	RightUse Right = 1 << iota
	// RightAdmin lets a member create, alter and drop pools and
	// classifiers and change grants (YDB: CREATE TABLE, ALTER SCHEMA,
	// REMOVE SCHEMA on the pools directory, ALL on the database).
	RightAdmin
)

// String returns "use" or "admin".
func (r Right) String() string {
	switch r {
	case RightUse:
		return "use"
	case RightAdmin:
		return "admin"
	}
	return fmt.Sprintf("Right(%d)", uint8(r))
}

// Grant is one right held by one member.
type Grant struct {
	Right Right
	// Pool is the pool a RightUse grant is for; "" means every pool. It
	// is always "" for RightAdmin.
	Pool   string
	Member string // user, %group or AllUsers
	At     Pos    // the GRANT that gave it
}

// grantKey identifies a grant in the model.
type grantKey struct {
	right  Right
	pool   string
	member string
}

// privilege is the host meaning of one YDB right name.
type privilege struct {
	rights Right
	// silent rights have no host meaning but are the usual companions of
	// rights that have one (YDB needs DESCRIBE SCHEMA beside SELECT ROW),
	// so they are accepted without a warning.
	silent bool
}

// privileges maps YDB's right names, keyword and 'ydb.*' spellings, in
// upper case, to their host meaning. Rights missing here are refused.
var privileges = func() map[string]privilege {
	m := map[string]privilege{}
	add := func(p privilege, names ...string) {
		for _, n := range names {
			m[strings.ToUpper(n)] = p
		}
	}
	use := privilege{rights: RightUse}
	admin := privilege{rights: RightAdmin}
	both := privilege{rights: RightUse | RightAdmin}
	add(use, "SELECT ROW", "ydb.granular.select_row", "SELECT TABLES", "ydb.tables.read", "SELECT", "ydb.generic.read")
	add(admin, "CREATE TABLE", "ydb.granular.create_table", "ALTER SCHEMA", "ydb.granular.alter_schema",
		"REMOVE SCHEMA", "ydb.granular.remove_schema", "INSERT", "ydb.generic.write", "GRANT", "ydb.access.grant")
	add(both, "ALL", "ALL PRIVILEGES", "USE", "ydb.generic.use", "USE LEGACY", "ydb.generic.use_legacy",
		"FULL", "ydb.generic.full", "FULL LEGACY", "ydb.generic.full_legacy")
	add(privilege{silent: true}, "DESCRIBE SCHEMA", "ydb.granular.describe_schema", "LIST", "ydb.generic.list",
		"CONNECT", "ydb.database.connect")
	add(privilege{}, "UPDATE ROW", "ydb.granular.update_row", "ERASE ROW", "ydb.granular.erase_row",
		"MODIFY TABLES", "ydb.tables.modify", "CREATE DIRECTORY", "ydb.granular.create_directory",
		"CREATE QUEUE", "ydb.granular.create_queue", "CREATE", "ydb.database.create", "DROP", "ydb.database.drop",
		"MANAGE", "ydb.generic.manage")
	return m
}()

// privilegeNames lists the accepted right names, for suggestions.
var privilegeNames = func() []string {
	out := make([]string, 0, len(privileges))
	for n := range privileges {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}()

// poolsDir is where YDB keeps resource pools in its scheme tree; grants on
// it or below it are grants on pools.
var poolsDir = []string{".metadata", "workload_manager", "pools"}

// target is what a grant object means on a host.
type target struct {
	pool string // "" = every pool (the pools directory or the database)
}

// resolveObject maps a grant object to a target, or says why it cannot.
// Accepted: RESOURCE POOL name; a scheme path ending in
// .metadata/workload_manager/pools[/name], with any database prefix
// (/Root/.metadata/…); a database path of at most two segments (`/my_db`,
// `/Root/db`, `/`), which in YDB passes its rights down to every pool.
func (m *Model) resolveObject(o grantObject) (target, string) {
	if o.path == "" {
		return m.poolTarget(o.pool)
	}
	var segs []string
	for _, s := range strings.Split(o.path, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	if i := slices.Index(segs, poolsDir[0]); i >= 0 {
		if rest := segs[i:]; len(rest) >= len(poolsDir) && slices.Equal(rest[:len(poolsDir)], poolsDir) {
			switch rest = rest[len(poolsDir):]; len(rest) {
			case 0:
				return target{}, ""
			case 1:
				return m.poolTarget(rest[0])
			}
		}
	} else if len(segs) <= 2 {
		return target{}, ""
	}
	return target{}, fmt.Sprintf("`%s` is neither a resource pool nor a database; accepted: `.metadata/workload_manager/pools/NAME`, `.metadata/workload_manager/pools`, a database such as `/my_db`, or RESOURCE POOL NAME", o.path)
}

// poolTarget is the target for one named pool, which must exist.
func (m *Model) poolTarget(name string) (target, string) {
	if _, ok := m.pools[name]; ok {
		return target{pool: name}, ""
	}
	return target{}, m.noPool(name)
}

// noPool says that pool name does not exist, suggesting a near name.
func (m *Model) noPool(name string) string {
	names := make([]string, 0, len(m.pools))
	for n := range m.pools {
		names = append(names, n)
	}
	slices.Sort(names)
	if best, ok := nearest(name, names); ok {
		return fmt.Sprintf("pool %q does not exist; did you mean %q?", name, best)
	}
	return fmt.Sprintf("pool %q does not exist", name)
}

// grant carries out a GRANT or REVOKE.
func (a *applier) grant(s *grantStmt) {
	verb := "GRANT"
	if s.revoke {
		verb = "REVOKE"
	}
	rights, ok := a.rightsOf(s, verb)
	var targets []target
	var targetPos []Pos
	for _, o := range s.objects {
		t, why := a.m.resolveObject(o)
		if why != "" {
			a.errs.errorf(o.pos, "%s", why)
			ok = false
			continue
		}
		targets = append(targets, t)
		targetPos = append(targetPos, o.pos)
	}
	for _, mw := range s.members {
		if why := checkMember(mw.text); why != "" {
			a.errs.errorf(mw.pos, "%s", why)
			ok = false
		}
	}
	if !ok {
		return
	}
	for i, t := range targets {
		r := rights
		if t.pool != "" && r&RightAdmin != 0 {
			// Administration on a host covers every pool at once: there
			// is no per-pool administrator to map a right on one pool to.
			r &^= RightAdmin
			if r == 0 {
				a.warnf(targetPos[i], "%s %s on a single pool grants nothing on a host: administration covers all pools; to make an administrator, grant it on `.metadata/workload_manager/pools` or the database", verb, privilegeList(s.privileges))
			}
		}
		for _, mw := range s.members {
			for _, right := range []Right{RightUse, RightAdmin} {
				if r&right == 0 {
					continue
				}
				k := grantKey{right: right, pool: t.pool, member: mw.text}
				if right == RightAdmin {
					k.pool = ""
				}
				if !s.revoke {
					if _, had := a.m.grants[k]; !had {
						a.m.grants[k] = s.at
					}
					continue
				}
				if _, had := a.m.grants[k]; !had {
					a.warnf(mw.pos, "REVOKE: %s has no %s grant %s; nothing to revoke", mw.text, right, describeTarget(k.pool, right))
					continue
				}
				delete(a.m.grants, k)
			}
		}
	}
}

// rightsOf is the rights s grants or revokes, from its privileges and its
// GRANT OPTION; ok is false when a privilege is unknown (each is reported).
func (a *applier) rightsOf(s *grantStmt, verb string) (rights Right, ok bool) {
	ok = true
	for _, pw := range s.privileges {
		name := strings.ToUpper(strings.Join(strings.Fields(pw.text), " "))
		pr, known := privileges[name]
		if !known {
			msg := fmt.Sprintf("unknown right %q", pw.text)
			if best, close := nearest(name, privilegeNames); close {
				msg += fmt.Sprintf("; did you mean %s?", best)
			} else {
				msg += "; accepted: YDB's rights such as SELECT ROW, ALL, 'ydb.generic.use' (see docs/pools.md)"
			}
			a.errs.errorf(pw.pos, "%s", msg)
			ok = false
			continue
		}
		if pr.rights == 0 && !pr.silent {
			a.warnf(pw.pos, "%s %s has no meaning for resource pools on a host; it is ignored", verb, pw.text)
		}
		rights |= pr.rights
	}
	if s.grantOption {
		rights |= RightAdmin
	}
	if s.revoke && s.grantOption {
		// REVOKE GRANT OPTION FOR … takes back only the right to grant.
		rights = RightAdmin
	}
	return rights, ok
}

// privilegeList renders the rights of a statement as written.
func privilegeList(ws []word) string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return strings.Join(out, ", ")
}

// describeTarget renders where a grant applies, for messages.
func describeTarget(pool string, r Right) string {
	switch {
	case r == RightAdmin:
		return "on the pools"
	case pool == "":
		return "on every pool"
	default:
		return fmt.Sprintf("on pool %q", pool)
	}
}

// Grants returns every grant, admin grants first, then use grants by pool
// ("" = every pool first) and member.
func (m *Model) Grants() []Grant {
	out := make([]Grant, 0, len(m.grants))
	for k, at := range m.grants {
		out = append(out, Grant{Right: k.right, Pool: k.pool, Member: k.member, At: at})
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(b.Right, a.Right), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Member, b.Member))
	})
	return out
}

// MayUse reports whether id may run queries in pool: everyone may use
// `default`; any other pool needs a use grant on it or on every pool, to
// the user, one of its groups or AllUsers. Root's exemption is the
// caller's to apply.
func (m *Model) MayUse(id Account, pool string) bool {
	if _, ok := m.pools[pool]; !ok {
		return false
	}
	if pool == DefaultPool {
		return true
	}
	for k := range m.grants {
		if k.right == RightUse && (k.pool == pool || k.pool == "") && id.matches(k.member) {
			return true
		}
	}
	return false
}

// IsAdmin reports whether id holds an admin grant. Root and the
// configured admin group are the caller's to add.
func (m *Model) IsAdmin(id Account) bool {
	for k := range m.grants {
		if k.right == RightAdmin && id.matches(k.member) {
			return true
		}
	}
	return false
}
