package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []mountinfoLine
		wantErr string
	}{
		{
			name: "v1 with optional fields",
			in:   "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime shared:5 master:1 - cgroup cgroup rw,cpu\n",
			want: []mountinfoLine{{mountPoint: "/sys/fs/cgroup/cpu", fsType: "cgroup", superOptions: "rw,cpu"}},
		},
		{
			name: "v2 without optional fields",
			in:   "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			want: []mountinfoLine{{mountPoint: "/sys/fs/cgroup/unified", fsType: "cgroup2", superOptions: "rw"}},
		},
		{
			name: "octal escapes in the mount point",
			in:   `27 22 0:25 / /mnt/a\040b\134c rw - tmpfs tmpfs rw` + "\n",
			want: []mountinfoLine{{mountPoint: `/mnt/a b\c`, fsType: "tmpfs", superOptions: "rw"}},
		},
		{
			name: "blank lines skipped",
			in:   "\n40 30 0:37 / /x rw - cgroup2 cgroup2 rw\n\n",
			want: []mountinfoLine{{mountPoint: "/x", fsType: "cgroup2", superOptions: "rw"}},
		},
		{
			name: "missing super options",
			in:   "40 30 0:37 / /x rw - cgroup2 cgroup2\n",
			want: []mountinfoLine{{mountPoint: "/x", fsType: "cgroup2"}},
		},
		{name: "no separator", in: "40 30 0:37 / /x rw cgroup2 cgroup2 rw\n", wantErr: "line 1"},
		{name: "separator too early", in: "40 30 0:37 / - cgroup2 cgroup2 rw\n", wantErr: "line 1"},
		{name: "no fstype after separator", in: "40 30 0:37 / /x rw -\n", wantErr: "line 1"},
		{name: "truncated escape", in: `40 30 0:37 / /x\04 rw - cgroup2 cgroup2 rw`, wantErr: "truncated escape"},
		{name: "non-octal escape", in: `40 30 0:37 / /x\09a rw - cgroup2 cgroup2 rw`, wantErr: "bad escape"},
		{name: "escape above a byte", in: `40 30 0:37 / /x\777 rw - cgroup2 cgroup2 rw`, wantErr: "above"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMountinfo(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseMountinfo(f *testing.F) {
	for _, dir := range []string{"hybrid", "unified", "legacy", "nocgroup"} {
		b, err := os.ReadFile(filepath.Join("../testdata/cgroupfs/mounts", dir, "proc/self/mountinfo"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		ms, err := parseMountinfo(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.fsType == "" || m.mountPoint == "" {
				t.Fatalf("parsed a line without a mount point or filesystem type: %+v", m)
			}
		}
	})
}

func TestDetect(t *testing.T) {
	fixture := func(name string) string { return filepath.Join("../testdata/cgroupfs/mounts", name) }
	tests := []struct {
		name        string
		root        string
		mode        Mode
		cpu, cpuacc string // want directories relative to root; "" = ErrNoController
		cpuV2       bool
		memory      string
	}{
		{name: "hybrid: this host's layout", root: fixture("hybrid"), mode: Hybrid,
			cpu: "sys/fs/cgroup/cpu", cpuacc: "sys/fs/cgroup/cpuacct", memory: "sys/fs/cgroup/memory"},
		{name: "unified", root: fixture("unified"), mode: Unified,
			cpu: "sys/fs/cgroup", cpuV2: true, cpuacc: "", memory: "sys/fs/cgroup"},
		{name: "legacy, cpu and cpuacct co-mounted", root: fixture("legacy"), mode: Legacy,
			cpu: "sys/fs/cgroup/cpu,cpuacct", cpuacc: "sys/fs/cgroup/cpu,cpuacct", memory: "sys/fs/cgroup/memory"},
		{name: "no cgroup mounts", root: fixture("nocgroup"), mode: Unavailable},
		{name: "unified without cpu", root: fixture("unified-nocpu"), mode: Unified, memory: "sys/fs/cgroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := Detect(tt.root)
			if err != nil {
				t.Fatal(err)
			}
			if ms.Mode != tt.mode {
				t.Errorf("mode = %s, want %s", ms.Mode, tt.mode)
			}
			for _, c := range []struct {
				ctrl, want string
				v2         bool
			}{{"cpu", tt.cpu, tt.cpuV2}, {"cpuacct", tt.cpuacc, false}, {"memory", tt.memory, tt.cpuV2 || tt.mode == Unified}} {
				dir, v2, err := ms.Controller(c.ctrl)
				if c.want == "" {
					if !errors.Is(err, ErrNoController) {
						t.Errorf("%s: dir %q err %v, want ErrNoController", c.ctrl, dir, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", c.ctrl, err)
					continue
				}
				if want := filepath.Join(tt.root, c.want); dir != want || v2 != c.v2 {
					t.Errorf("%s: dir %q v2 %v, want %q v2 %v", c.ctrl, dir, v2, want, c.v2)
				}
			}
			root, err := ms.DefaultRoot()
			if tt.cpu == "" {
				if !errors.Is(err, ErrNoController) {
					t.Errorf("DefaultRoot: %q, %v; want ErrNoController", root, err)
				}
			} else if want := filepath.Join(tt.root, tt.cpu, "poolagent"); root != want || err != nil {
				t.Errorf("DefaultRoot: %q, %v; want %q", root, err, want)
			}
		})
	}
}

// TestTwin checks the same cgroup in another controller's hierarchy.
func TestTwin(t *testing.T) {
	hybrid := Mounts{Mode: Hybrid, Unified: "/sys/fs/cgroup/unified", UnifiedControllers: []string{"memory"},
		V1: map[string]string{"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct"}}
	comounted := Mounts{Mode: Legacy, V1: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"}}
	unified := Mounts{Mode: Unified, Unified: "/sys/fs/cgroup", UnifiedControllers: []string{"cpu", "memory"}}
	tests := []struct {
		name string
		m    Mounts
		ctrl string
		dir  string
		want string
	}{
		{"v1 cpuacct apart", hybrid, "cpuacct", "/sys/fs/cgroup/cpu/poolagent/olap", "/sys/fs/cgroup/cpuacct/poolagent/olap"},
		{"v1 cpu,cpuacct together", comounted, "cpuacct", "/sys/fs/cgroup/cpu,cpuacct/poolagent", "/sys/fs/cgroup/cpu,cpuacct/poolagent"},
		{"v1 cpu, memory only on v2", hybrid, "memory", "/sys/fs/cgroup/cpu/poolagent", ""},
		{"v2 has no cpuacct", unified, "cpuacct", "/sys/fs/cgroup/poolagent", ""},
		{"v2 memory is the same cgroup", unified, "memory", "/sys/fs/cgroup/poolagent", "/sys/fs/cgroup/poolagent"},
		{"outside the cpu hierarchy", hybrid, "cpuacct", "/tmp/copy/poolagent", ""},
		{"the cpu mount itself", hybrid, "cpuacct", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Twin(tt.ctrl, tt.dir); got != tt.want {
				t.Errorf("Twin(%q, %q) = %q, want %q", tt.ctrl, tt.dir, got, tt.want)
			}
		})
	}
}

func TestDetectErrors(t *testing.T) {
	if _, err := Detect(t.TempDir()); err == nil || !strings.Contains(err.Error(), "mountinfo") {
		t.Errorf("missing mountinfo: err = %v", err)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/self"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/self/mountinfo"), []byte("1 0 0:1 / /cg rw - cgroup2 cgroup2 rw\n"), 0o644)
	if _, err := Detect(root); err == nil || !strings.Contains(err.Error(), "cgroup.controllers") {
		t.Errorf("cgroup2 mount without cgroup.controllers: err = %v", err)
	}
}
