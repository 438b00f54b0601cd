package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupMount is where the cgroup v2 hierarchy is mounted, as runc and
// crun assume it.
const CgroupMount = "/sys/fs/cgroup"

// ReadLimits reads the limits of the cgroup at dir (a directory below
// CgroupMount): cpu.max, cpu.max.burst and memory.max. A file that is not
// there (a controller not enabled) leaves its limit unset.
func ReadLimits(dir string) (Limits, error) {
	l := Limits{QuotaUsec: -1, MemoryBytes: -1}
	read := func(name string) (string, bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		return strings.TrimSpace(string(b)), true, nil
	}
	if v, ok, err := read("cpu.max"); err != nil {
		return l, err
	} else if ok {
		if l.QuotaUsec, l.PeriodUsec, err = parseCPUMax(v); err != nil {
			return l, fmt.Errorf("%s/cpu.max: %w", dir, err)
		}
	}
	if v, ok, err := read("cpu.max.burst"); err != nil {
		return l, err
	} else if ok {
		if l.BurstUsec, err = strconv.ParseUint(v, 10, 64); err != nil {
			return l, fmt.Errorf("%s/cpu.max.burst %q: %w", dir, v, err)
		}
	}
	if v, ok, err := read("memory.max"); err != nil {
		return l, err
	} else if ok && v != "max" {
		if l.MemoryBytes, err = strconv.ParseInt(v, 10, 64); err != nil {
			return l, fmt.Errorf("%s/memory.max %q: %w", dir, v, err)
		}
	}
	return l, nil
}

// parseCPUMax reads cpu.max, "max|QUOTA PERIOD" in µs; "max" is quota -1.
func parseCPUMax(v string) (quota int64, period uint64, err error) {
	q, p, ok := strings.Cut(v, " ")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want \"max|QUOTA PERIOD\"", v)
	}
	if period, err = strconv.ParseUint(p, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%q: period: %w", v, err)
	}
	if q == "max" {
		return -1, period, nil
	}
	if quota, err = strconv.ParseInt(q, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%q: quota: %w", v, err)
	}
	return quota, period, nil
}
