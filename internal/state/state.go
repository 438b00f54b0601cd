// Package state is the journal of run-time DDL changes: the statements an
// administrator sent through `poolagent sql` that the daemon accepted, kept
// in order in its state directory so that they survive restarts and
// reloads and are applied over the pool file each time (the name is the
// directory's, --state-dir; the journal is all it keeps).
//
// The state is an ordered log of accepted changes in one file,
// <dir>/changes.json. Every change rewrites the whole file atomically: the new
// content goes to a temporary file in the same directory, which is fsynced,
// renamed over changes.json, and then the directory is fsynced. A reader
// therefore sees either the old log or the new one, never a mix, and after a
// crash the log is always a prefix of the accepted changes. The effective pool
// model is the pool file with these changes applied in order (see
// docs/operate.md).
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/observe"
)

// FileName is the log's file name inside the state directory.
const FileName = "changes.json"

// Format identifies the file layout; a file with another value is refused
// rather than guessed at.
const Format = "poolagent-changes/1"

// lockName is the file flock(2)ed while a Store is open, so two daemons
// never write one state directory.
const lockName = "lock"

// tempPrefix starts the name of a temporary file that becomes changes.json
// when renamed; one left by a crash is removed by [Open].
const tempPrefix = "." + FileName + ".tmp-"

// ErrLocked is returned by [Open] when another process holds the state
// directory.
var ErrLocked = errors.New("state directory is in use by another process")

// ErrNoDir is returned by [Open] when the state directory does not exist
// and [Options].Create was not given: a mistyped path must not start a
// daemon that keeps its changes somewhere nobody looks.
var ErrNoDir = errors.New("state directory does not exist")

// ErrNotPrivate is returned by [Open] when the state directory, or the
// change log in it, belongs to a user other than the daemon's or may be
// written by group or others: whoever can write the log makes the daemon
// apply their changes, GRANT ALL included, with its rights.
var ErrNotPrivate = errors.New("may be written by another user")

// Options tune [Open].
type Options struct {
	// Create makes a missing state directory (mode 0700) instead of
	// refusing it.
	Create bool
}

// Change is one accepted run-time change: the DDL text as the administrator
// sent it, applied after the pool file and every earlier change.
type Change struct {
	// Seq numbers changes from 1 without gaps.
	Seq uint64 `json:"seq"`
	// Time is when the change was accepted, UTC.
	Time time.Time `json:"time"`
	// UID is the administrator's user id from the socket's peer credentials.
	UID uint32 `json:"uid"`
	// User is the administrator's user name, "" if it has none.
	User string `json:"user,omitempty"`
	// DDL is the accepted statements, verbatim.
	DDL string `json:"ddl"`
}

// Log is the content of changes.json.
type Log struct {
	Format  string   `json:"format"`
	Changes []Change `json:"changes"`
}

// Store is an open state directory. Its methods are safe for concurrent use.
type Store struct {
	dir  string
	lock *os.File

	mu      sync.Mutex
	changes []Change
}

// Open locks the state directory dir (a missing one is refused with
// ErrNoDir, or made with mode 0700 when opt.Create), removes temporary files
// a crash left behind, and reads the log. A missing changes.json is an empty
// log. The directory (and the symbolic link naming it, if dir is one) and
// changes.json must belong to the process's user and not be writable by
// group or others, else Open refuses them with ErrNotPrivate. Close
// releases the lock.
func Open(dir string, opt Options) (*Store, error) {
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist) && opt.Create:
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create state directory: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w", dir, ErrNoDir)
	case err != nil:
		return nil, fmt.Errorf("state directory: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("state directory %s: not a directory", dir)
	}
	// Once the directory is private, nobody else can put another file in
	// the log's place between the log's check and its read.
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	if err := checkPrivate(filepath.Join(dir, FileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lockPath := filepath.Join(dir, lockName)
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w: %s keeps its run-time changes there; stop that daemon first, or give this one another state directory",
				dir, ErrLocked, observe.FlockOwner(int(lock.Fd())))
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	s := &Store{dir: dir, lock: lock}
	if err := s.removeTemps(); err != nil {
		s.Close()
		return nil, err
	}

	changes, err := Read(s.Path())
	if err != nil {
		s.Close()
		return nil, err
	}
	s.changes = changes
	return s, nil
}

// Close releases the state directory.
func (s *Store) Close() error {
	return s.lock.Close()
}

// Path is the log file's path, <dir>/changes.json.
func (s *Store) Path() string {
	return filepath.Join(s.dir, FileName)
}

// Changes returns a copy of the log, oldest first.
func (s *Store) Changes() []Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Change(nil), s.changes...)
}

// Append numbers c (its Seq is set to the next number; a zero Time becomes
// now) and persists the log with c at its end. When Append returns nil the
// change is on stable storage; on error the log in memory is the one before
// the call, and so is the file, unless only the final sync of the directory
// failed (the renamed file may then hold c; the next Append rewrites it
// from memory).
func (s *Store) Append(c Change) (Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Seq = uint64(len(s.changes)) + 1
	if c.Time.IsZero() {
		c.Time = time.Now()
	}
	c.Time = c.Time.UTC()
	next := append(append(make([]Change, 0, len(s.changes)+1), s.changes...), c)
	if err := s.write(next); err != nil {
		return Change{}, err
	}
	s.changes = next
	return c, nil
}

// write replaces changes.json with the log of changes: temporary file, fsync,
// rename, fsync of the directory (without the last step a crash could
// forget the rename even though the call returned).
func (s *Store) write(changes []Change) error {
	data, err := json.MarshalIndent(Log{Format: Format, Changes: changes}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", s.Path(), err)
	}
	data = append(data, '\n')
	return writeAtomic(s.dir, data)
}

// writeAtomic makes dir/changes.json hold data, all or nothing, durably,
// through a temporary file named with tempPrefix (which Open removes when a
// crash left one).
func writeAtomic(dir string, data []byte) error {
	path := filepath.Join(dir, FileName)
	tmp, err := os.CreateTemp(dir, tempPrefix)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmpPath := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmpPath)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		os.Remove(tmpPath)
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// checkPrivate refuses path, a file or a directory (and the file or
// directory a symbolic link at path names), unless it belongs to the
// process's user and group and others may not write it.
func checkPrivate(path string) error {
	what := "state directory"
	if filepath.Base(path) == FileName {
		what = "state file"
	}
	euid := os.Geteuid()
	for _, stat := range []func(string) (fs.FileInfo, error){os.Lstat, os.Stat} {
		fi, err := stat(path)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s %s: no owner to check", what, path)
		}
		switch {
		case int(st.Uid) != euid:
			return fmt.Errorf("%s %s is owned by uid %d, not by uid %d that the daemon runs as: it %w, whose changes the daemon would apply with its rights; "+
				"use a directory only the daemon's user made and can write (systemd's StateDirectory=, or --create-state-dir under a directory only it can write), "+
				"or, once its changes.json is checked, chown %d %s",
				what, path, st.Uid, euid, ErrNotPrivate, euid, path)
		case fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("%s %s has mode %04o: it %w (group or others may write it), whose changes the daemon would apply with its rights; "+
				"once its changes.json is checked, chmod go-w %s (--create-state-dir makes directories 0700, the daemon writes changes.json 0600)",
				what, path, fi.Mode().Perm(), ErrNotPrivate, path)
		}
	}
	return nil
}

// removeTemps deletes temporary files of writes that never reached their
// rename (the process died in between); they are never part of the state.
func (s *Store) removeTemps() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read state directory: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return fmt.Errorf("remove stale temporary file: %w", err)
			}
		}
	}
	return nil
}

// Read reads a changes.json without locking its directory (for views and
// tools). A missing file is an empty log; a symbolic link (dangling or
// not) or anything but a regular file is refused, never followed: the
// daemon that reads it is root.
func Read(path string) ([]Change, error) {
	// O_NONBLOCK: opening a named pipe must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s: a symbolic link, not followed (the change log must be a regular file)", path)
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%v)", path, fi.Mode().Type())
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	changes, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return changes, nil
}

// Parse decodes the content of a changes.json and checks it: the Format
// value, no unknown fields, sequence numbers 1, 2, 3, ... and non-empty DDL.
// Its errors say where (a byte offset, a change's number, a field of the
// format) and never quote the content: the file may not be what it claims.
func Parse(data []byte) ([]Change, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Log
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("not a change log: %s", describe(err, dec.InputOffset()))
	}
	if dec.More() {
		return nil, errors.New("not a change log: data after the JSON object")
	}
	if l.Format != Format {
		return nil, fmt.Errorf("format is not %q, the only one supported", Format)
	}
	for i, c := range l.Changes {
		if c.Seq != uint64(i)+1 {
			return nil, fmt.Errorf("change %d has seq %d (want %d: changes are numbered from 1 without gaps)", i+1, c.Seq, i+1)
		}
		if strings.TrimSpace(c.DDL) == "" {
			return nil, fmt.Errorf("change %d has no ddl", c.Seq)
		}
	}
	if len(l.Changes) == 0 {
		return nil, nil
	}
	return l.Changes, nil
}

// describe says what is wrong with a change log's JSON without quoting it.
func describe(err error, offset int64) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	case errors.As(err, &syntax):
		return fmt.Sprintf("invalid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s is not a %s (byte %d)", typ.Field, typ.Type, typ.Offset)
	}
	return fmt.Sprintf("a field the format does not have, before byte %d", offset)
}
