package poolagent

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMapNamesEveryPackage keeps doc.go's map whole: every directory with
// Go code is named in it.
func TestMapNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || path == "doc.go" || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.Dir(path)
		named := regexp.MustCompile(`[\s(]` + regexp.QuoteMeta(pkg) + `[\s),:]`)
		if pkg != "." && !named.Match(doc) {
			t.Errorf("doc.go's package map does not name %s", pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTopLevelIsTheLibrary keeps the design card's layout: at the top only
// the library (cgroupfs, planner, simulate, observe), the programs in cmd/
// and what runs around them in scripts/; every other package is internal.
func TestTopLevelIsTheLibrary(t *testing.T) {
	library := map[string]bool{"cgroupfs": true, "planner": true, "simulate": true, "observe": true,
		"cmd": true, "scripts": true, "internal": true}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		top, _, nested := strings.Cut(filepath.ToSlash(path), "/")
		if nested && !library[top] {
			t.Errorf("%s: package %s is at the top level; only the library (cgroupfs, planner, simulate, observe), cmd/ and scripts/ are, the rest lives under internal/", path, top)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
