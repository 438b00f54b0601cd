package planner

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// DefaultPool is the pool that always exists and takes every query no
// classifier routes elsewhere.
const DefaultPool = "default"

// AllUsers is YDB's group of every authenticated user; on a host, every
// local user.
const AllUsers = "all-users@well-known"

// MaxNameLen is the longest pool or classifier name, in characters.
const MaxNameLen = 64

// validName is the whole rule for pool and classifier names,
// ^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$: a pool name becomes a cgroup directory
// (<root>/<pool>), so only a conservative charset is accepted. It already
// excludes ".", "..", "/", control characters and every dotted kernel file
// name; checkName looks for those first only to say precisely why a name
// is refused. (A loop, not a regexp: compiling the bounded repetition at
// start-up would cost every poolagent command, the query client included.)
func validName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// nameRule is the accepted form of names, for messages.
const nameRule = "1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'"

// kernelPrefixes start the names of cgroup interface files: the core's
// and each controller's (v2 and v1). A directory with such a name could
// be mistaken for, or collide with, a kernel file.
var kernelPrefixes = []string{
	"cgroup.", "cpu.", "cpuacct.", "cpuset.", "memory.", "io.", "blkio.", "pids.",
	"hugetlb.", "rdma.", "misc.", "devices.", "freezer.", "net_cls.", "net_prio.",
	"perf_event.", "dmem.",
}

// kernelFiles are cgroup v1 interface files without a dot; a pool with
// such a name would collide with the file in the pool root.
var kernelFiles = []string{"tasks", "notify_on_release", "release_agent"}

// checkName returns why name cannot name a pool (what is "pool" or
// "classifier"), or "" when it can.
func checkName(what, name string) string {
	reason := ""
	switch {
	case name == "":
		reason = "it is empty"
	case name == "." || name == "..":
		reason = "it names a directory itself or its parent"
	case strings.Contains(name, "/"):
		reason = "it contains '/', which would address another directory"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		reason = "it contains a control character"
	case len([]rune(name)) > MaxNameLen:
		reason = fmt.Sprintf("it is longer than %d characters", MaxNameLen)
	}
	if reason == "" {
		lower := strings.ToLower(name)
		for _, p := range kernelPrefixes {
			if strings.HasPrefix(lower, p) {
				reason = fmt.Sprintf("names starting with %q are the kernel's cgroup files", p)
			}
		}
		for _, f := range kernelFiles {
			if lower == f {
				reason = fmt.Sprintf("%q is a cgroup v1 kernel file", f)
			}
		}
	}
	if reason == "" && !validName(name) {
		reason = "it has characters outside the accepted set"
	}
	if reason == "" {
		return ""
	}
	return fmt.Sprintf("%s name %q is refused: %s; accepted: %s", what, name, reason, nameRule)
}

// CheckName returns why name cannot name a cgroup poolagent makes, or
// nil: the one rule for pools, classifiers, and the groups and tasks of a
// scenario. what says which ("pool", "group", ...), for the message.
func CheckName(what, name string) error {
	if why := checkName(what, name); why != "" {
		return errors.New(why)
	}
	return nil
}

// maxMemberLen is the longest user or group name in a member, in bytes.
const maxMemberLen = 256

// validMember is the form of a member, ^%?[A-Za-z0-9_][A-Za-z0-9_.@-]{0,255}\$?$:
// a Unix user name, %group, or all-users@well-known. '@' and '.' appear in
// directory-service user names (user1@domain); a trailing '$' in machine
// accounts.
func validMember(m string) bool {
	body := strings.TrimSuffix(strings.TrimPrefix(m, "%"), "$")
	if len(body) == 0 || len(body) > maxMemberLen || (!isAlnum(body[0]) && body[0] != '_') {
		return false
	}
	for i := 1; i < len(body); i++ {
		if c := body[i]; !isAlnum(c) && !strings.ContainsRune("_.@-", rune(c)) {
			return false
		}
	}
	return true
}

// checkMember returns why m cannot name a user or group, or "".
func checkMember(m string) string {
	if validMember(m) {
		return ""
	}
	return fmt.Sprintf("member %q is refused; accepted: a Unix user name (alice, user1@domain), %%group for a Unix group (%%analysts), or %s", m, AllUsers)
}

// Account is what a classifier's MEMBER_NAME and a GRANT are matched
// against: a Unix user's name and the names of its groups. (Who starts a
// query, with the credentials the kernel gives, is admission.Identity.)
type Account struct {
	User   string
	Groups []string
}

// matches reports whether member (a user, %group or AllUsers) includes id.
func (id Account) matches(member string) bool {
	switch {
	case member == AllUsers:
		return true
	case strings.HasPrefix(member, "%"):
		for _, g := range id.Groups {
			if g == member[1:] {
				return true
			}
		}
		return false
	default:
		return member == id.User
	}
}

// maxAppNameBytes is the longest file name Linux takes (NAME_MAX).
const maxAppNameBytes = 255

// checkAppName returns why a HAS_APP_NAME value is refused, or "". It is
// compared with the base name of the command's executable, so it is one
// file name: not empty, at most 255 bytes, without '/' and, so that it
// prints safely in tables and logs, without control characters.
func checkAppName(s string) string {
	const accepted = "accepted: the base name of an executable, such as 'make' or 'python3.11', 1 to 255 bytes without '/' or control characters"
	switch {
	case s == "":
		return fmt.Sprintf("app name is empty; %s", accepted)
	case len(s) > maxAppNameBytes:
		return fmt.Sprintf("app name %q is longer than %d bytes; %s", s, maxAppNameBytes, accepted)
	case strings.Contains(s, "/"):
		return fmt.Sprintf("app name %q contains '/': it is compared with the base name of the executable, never a path; %s", s, accepted)
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Sprintf("app name %q contains a control character; %s", s, accepted)
	}
	return ""
}
