package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// plantedTree makes root/olap/cpu.max and, outside the root, a secret
// file and directory, with symlinks to them planted inside the root.
func plantedTree(t *testing.T) (root, secretFile, secretDir string) {
	t.Helper()
	tmp := t.TempDir()
	root, secretFile, secretDir = filepath.Join(tmp, "root"), filepath.Join(tmp, "secret"), filepath.Join(tmp, "secretdir")
	for _, d := range []string{filepath.Join(root, "olap"), secretDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, v := range map[string]string{filepath.Join(root, "olap", fileCPUMax): "max 100000\n", secretFile: "secret\n", filepath.Join(secretDir, fileCPUMax): "secret\n"} {
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{filepath.Join(root, "olap", "link"): secretFile, filepath.Join(root, "evil"): secretDir, filepath.Join(root, "olap", "proc"): "/proc/self/root"} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	return root, secretFile, secretDir
}

func TestDirStaysBeneathRoot(t *testing.T) { Lookups(t, testDirStaysBeneathRoot) }

func testDirStaysBeneathRoot(t *testing.T) {
	root, secretFile, secretDir := plantedTree(t)
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"write through a dot-dot", func() error { return d.WriteFile("../secret", "x") }, unix.EXDEV},
		{"write an absolute path", func() error { return d.WriteFile(secretFile, "x") }, unix.EXDEV},
		{"write through a symlinked file", func() error { return d.WriteFile("olap/link", "x") }, unix.ELOOP},
		{"write below a symlinked directory", func() error { return d.WriteFile("evil/cpu.max", "x") }, unix.ELOOP},
		{"write through a magic link", func() error { return d.WriteFile("olap/proc/etc/hostname", "x") }, unix.ELOOP},
		{"read through a symlink", func() error { _, err := d.ReadFile("olap/link"); return err }, unix.ELOOP},
		{"list a symlinked directory", func() error { _, err := d.ReadDir("evil"); return err }, unix.ELOOP},
		{"mkdir below a symlinked directory", func() error { return d.Mkdir("evil/q1") }, unix.ELOOP},
		{"mkdir through a dot-dot", func() error { return d.Mkdir("../escaped") }, unix.EXDEV},
		{"rmdir below a symlinked directory", func() error { return d.Rmdir("evil/sub") }, unix.ELOOP},
		{"rmdir of dot-dot", func() error { return d.Rmdir("olap/..") }, unix.EINVAL},
		{"read a directory as a file", func() error { _, err := d.ReadFile("olap/cpu.max/x"); return err }, unix.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), root) {
				t.Errorf("error %q does not name the path", err)
			}
		})
	}
	for _, p := range []string{secretFile, filepath.Join(secretDir, fileCPUMax)} {
		if b, _ := os.ReadFile(p); string(b) != "secret\n" {
			t.Errorf("%s was changed: %q", p, b)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escaped")); !os.IsNotExist(err) {
		t.Error("a directory was made outside the root")
	}
	// The symlinks are not listed as child cgroups.
	subs, err := d.ReadDir(".")
	if err != nil || strings.Join(subs, ",") != "olap" {
		t.Errorf("ReadDir(.) = %v, %v; want [olap]", subs, err)
	}
	// What stays inside works.
	if b, err := d.ReadFile("./olap//cpu.max"); err != nil || string(b) != "max 100000\n" {
		t.Errorf("ReadFile(./olap//cpu.max) = %q, %v", b, err)
	}
	if err := d.Mkdir("olap/q1"); err != nil {
		t.Errorf("Mkdir(olap/q1): %v", err)
	}
	if err := d.Rmdir("olap/q1"); err != nil {
		t.Errorf("Rmdir(olap/q1): %v", err)
	}
}

// TestDirNoMountCrossing: with the mount check on (as OpenCgroupDir sets
// it), neither lookup follows a name into a file system mounted inside
// the root. On a temporary directory, so it runs on any host as root;
// TestKernelNoMountCrossing does the same on a cgroup tree.
func TestDirNoMountCrossing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root := t.TempDir()
	inner := filepath.Join(root, "mounted")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", inner, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", inner, err)
	}
	t.Cleanup(func() { unix.Unmount(inner, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(inner, "cpu.max"), []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Lookups(t, func(t *testing.T) {
		d, err := OpenDir(root)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.ReadFile("mounted/cpu.max"); err != nil {
			t.Errorf("without the mount check: %v, want the file read", err)
		}
		d.resolve |= unix.RESOLVE_NO_XDEV
		if _, err := d.ReadFile("mounted/cpu.max"); !errors.Is(err, unix.EXDEV) {
			t.Errorf("read across the mount: %v, want EXDEV", err)
		}
		if err := d.Mkdir("mounted/q1"); !errors.Is(err, unix.EXDEV) {
			t.Errorf("mkdir across the mount: %v, want EXDEV", err)
		}
		if _, err := d.ReadDir("."); err != nil {
			t.Errorf("ReadDir of the root itself: %v", err)
		}
	})
}

func TestDirWriteErrorKeepsPathAndValue(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.WriteFile("olap/cpu.max", "700000 100000")
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), `"700000 100000"`) || !strings.Contains(err.Error(), "olap/cpu.max") {
		t.Fatalf("err = %v; want ENOENT naming the value and the file", err)
	}
}

// TestApplyRefusesPlantedSymlinks: a pool whose directory or file was
// replaced by a symlink to outside the root makes the apply fail, and
// nothing outside is touched.
func TestApplyRefusesPlantedSymlinks(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		if _, err := tr.Reconcile(seedDesired()); err != nil {
			t.Fatal(err)
		}
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret")
		w.must(os.WriteFile(secret, []byte("secret\n"), 0o644))
		root := tr.Root(tr.order[0])
		file := fileCFSQuota
		if v2 {
			file = fileCPUMax
		}
		w.must(os.Remove(filepath.Join(root, "olap", file)))
		w.must(os.Symlink(secret, filepath.Join(root, "olap", file)))
		d := seedDesired()
		d.Pools[2].Pool = cg(500000, 100000, 0, 100, 0)
		_, err := tr.Reconcile(d)
		if !errors.Is(err, unix.ELOOP) {
			t.Fatalf("err = %v, want ELOOP", err)
		}
		if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
			t.Errorf("the file outside the root was changed: %q", b)
		}
	})
}

// TestOpenCgroupDirRefusesOtherFS: a directory that is not on a cgroup
// file system is refused before anything could be written below it.
func TestOpenCgroupDirRefusesOtherFS(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenCgroupDir(dir)
	if !errors.Is(err, ErrNotCgroup) {
		t.Fatalf("OpenCgroupDir(%s) = %v, %v; want ErrNotCgroup", dir, d, err)
	}
	for _, want := range []string{dir, "accepted: cgroup2 0x63677270 or cgroup 0x27e0eb"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestStillAt: an open pool root is in place until it is removed, and
// stays gone when a directory is made again at its path.
func TestStillAt(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.StillAt(); err != nil {
		t.Fatalf("StillAt of an open root: %v", err)
	}
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := d.StillAt(); !errors.Is(err, ErrRootGone) || !strings.Contains(err.Error(), "nothing is there now") {
		t.Errorf("StillAt of a removed root: %v, want ErrRootGone and nothing there", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.StillAt(); !errors.Is(err, ErrRootGone) || !strings.Contains(err.Error(), "another directory is there now") {
		t.Errorf("StillAt of a root made again: %v, want ErrRootGone and another directory there", err)
	}
}

// TestDirReadDirMany lists a directory whose entries take several
// getdents64 calls: every subdirectory, and nothing else, as os.ReadDir
// has them.
func TestDirReadDirMany(t *testing.T) {
	root := t.TempDir()
	var want []string
	for i := range 300 {
		name := fmt.Sprintf("%03d%s", i, strings.Repeat("q", 200))
		if err := os.WriteFile(filepath.Join(root, name+".file"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			continue
		}
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if err := os.Symlink(".", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.ReadDir(".")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ReadDir: %d names, %v; want the %d directories", len(got), err, len(want))
	}
	if _, err := d.ReadDir("000" + strings.Repeat("q", 200) + ".file"); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("ReadDir of a file: %v, want ENOTDIR", err)
	}
}
