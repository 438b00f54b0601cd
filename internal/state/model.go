package state

import (
	"fmt"

	"github.com/poolagent/poolagent/planner"
)

// Source names change seq of the log at path in DDL positions, so an error
// in it reads "/var/lib/poolagent/changes.json#3:1:27: ...".
func Source(path string, seq uint64) string {
	return fmt.Sprintf("%s#%d", path, seq)
}

// Effective is the model the daemon runs: the pool file (poolFile names
// it, src is its content) with the logged changes applied after it, in
// order, each all or nothing as it was accepted. A change that no longer
// applies (the pool file was edited since) is an error naming the change;
// nothing is skipped silently.
func Effective(poolFile string, src []byte, logPath string, changes []Change) (*planner.Model, []planner.Warning, error) {
	m, warns, err := planner.Load(poolFile, src)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range changes {
		stmts, err := planner.Parse(Source(logPath, c.Seq), []byte(c.DDL))
		if err == nil {
			var w []planner.Warning
			m, w, err = planner.Apply(m, stmts)
			warns = append(warns, w...)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("run-time change %d (uid %d, %s) no longer applies after %s; "+
				"change the pool file, or, while the daemon is stopped, remove the change from %s and number the rest from 1:\n%w",
				c.Seq, c.UID, c.Time.UTC().Format("2006-01-02 15:04:05Z"), poolFile, logPath, err)
		}
	}
	return m, warns, nil
}
