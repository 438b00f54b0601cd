package protocol

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps the protocol a package of its own: both
// ends import it, so it imports nothing of poolagent's (its replies never
// carry state's or sysview's types) and nothing outside the standard
// library (the slim poolagent-run links it).
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg != "github.com/poolagent/poolagent/protocol" {
			t.Errorf("package protocol imports %s; it may import only the standard library", pkg)
		}
	}
}
