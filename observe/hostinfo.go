package observe

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Host facts the kernel model of throttling needs, and what a report
// says about the host it ran on.

// DefaultHZ is the CONFIG_HZ assumed when the kernel's configuration
// cannot be read: Debian's and most distributions' default.
const DefaultHZ = 250

// DefaultSliceUsec is the kernel's default
// sched_cfs_bandwidth_slice_us: the quota a CPU takes from its group's
// pool at a time, µs.
const DefaultSliceUsec = 5000

// KernelSettings are the host settings the kernel model needs.
type KernelSettings struct {
	// SliceUsec is /proc/sys/kernel/sched_cfs_bandwidth_slice_us.
	SliceUsec int64
	// HZ is CONFIG_HZ; the tick is 1e6/HZ µs.
	HZ int
	// WakeCreditUsec is CFS's credit to a group enqueued again after a
	// throttle, on kernels before EEVDF (WakeCreditUsec); 0 from 6.6.
	WakeCreditUsec int64
	// Source says where each value came from, for the report.
	Source string
}

// TickUsec is the scheduler tick, µs: 1e6/HZ.
func (k KernelSettings) TickUsec() int64 { return int64(1_000_000 / k.HZ) }

// ReadKernelSettings reads the bandwidth slice from procRoot (normally
// /proc) and CONFIG_HZ from procRoot/config.gz or bootRoot/config-RELEASE
// (normally /boot), falling back to the kernel's default slice (5000 µs)
// and DefaultHZ, and saying so in Source.
func ReadKernelSettings(procRoot, bootRoot, release string) KernelSettings {
	k := KernelSettings{SliceUsec: DefaultSliceUsec, HZ: DefaultHZ}
	var src []string
	slicePath := filepath.Join(procRoot, "sys/kernel/sched_cfs_bandwidth_slice_us")
	b, err := os.ReadFile(slicePath)
	var slice int64
	if err == nil {
		slice, err = ParseSliceUsec(b)
	}
	if err != nil {
		src = append(src, fmt.Sprintf("slice %dus (kernel default: %v)", k.SliceUsec, err))
	} else {
		k.SliceUsec = slice
		src = append(src, "slice from "+slicePath)
	}
	hz, from, err := readHZ(procRoot, bootRoot, release)
	if err != nil {
		src = append(src, fmt.Sprintf("CONFIG_HZ=%d assumed (%v)", DefaultHZ, err))
	} else {
		k.HZ = hz
		src = append(src, fmt.Sprintf("CONFIG_HZ=%d from %s", hz, from))
	}
	if k.WakeCreditUsec = WakeCreditUsec(release, runtime.NumCPU()); k.WakeCreditUsec > 0 {
		src = append(src, fmt.Sprintf("CFS wake-up credit %dus (kernel %s is before EEVDF, 6.6)", k.WakeCreditUsec, release))
	}
	k.Source = strings.Join(src, ", ")
	return k
}

// WakeCreditUsec is the vruntime credit CFS gives an entity enqueued
// again after a sleep or a throttle on a kernel of this release, for a
// host of cpus online CPUs: before 6.6 (when EEVDF replaced CFS),
// place_entity puts it at min_vruntime minus half of sched_latency, and
// sched_latency is 6 ms times 1+log2 of the CPUs, at most 8
// (SCHED_TUNABLESCALING_LOG). From 6.6, and for a release it cannot
// read, it is 0: EEVDF keeps the entity's lag instead.
func WakeCreditUsec(release string, cpus int) int64 {
	major, minor, err := ParseKernelRelease(release)
	if err != nil || major > 6 || (major == 6 && minor >= 6) {
		return 0
	}
	factor := int64(bits.Len(uint(min(max(cpus, 1), 8)))) // 1 + ilog2
	return 6000 * factor / 2
}

// readHZ finds CONFIG_HZ in /proc/config.gz, then /boot/config-RELEASE,
// and returns it with the file it came from.
func readHZ(procRoot, bootRoot, release string) (int, string, error) {
	paths := []string{filepath.Join(procRoot, "config.gz")}
	if release != "" {
		paths = append(paths, filepath.Join(bootRoot, "config-"+release))
	}
	var errs []string
	for _, path := range paths {
		hz, err := configHZ(path)
		if err == nil {
			return hz, path, nil
		}
		errs = append(errs, err.Error())
	}
	return 0, "", fmt.Errorf("no kernel configuration: %s", strings.Join(errs, "; "))
}

// configHZ reads CONFIG_HZ from the kernel configuration file at path,
// gzip-compressed when the name ends in .gz; errors name the file.
func configHZ(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	hz, err := ParseConfigHZ(r)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return hz, nil
}

// ParseConfigHZ returns CONFIG_HZ from a kernel configuration file, whose
// lines read like
//
//	CONFIG_HZ_250=y
//	CONFIG_HZ=250
//
// Accepted values are 100..10000; anything else is an error.
func ParseConfigHZ(r io.Reader) (int, error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for s.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "CONFIG_HZ=")
		if !ok {
			continue
		}
		hz, err := strconv.Atoi(v)
		if err != nil || hz < 100 || hz > 10000 {
			return 0, fmt.Errorf("CONFIG_HZ=%q: want a number 100..10000", v)
		}
		return hz, nil
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read kernel configuration: %w", err)
	}
	return 0, fmt.Errorf("no CONFIG_HZ line")
}

// ParseSliceUsec parses the content of sched_cfs_bandwidth_slice_us: one
// decimal number of microseconds, at least 1 (the sysctl's own minimum).
func ParseSliceUsec(b []byte) (int64, error) {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("sched_cfs_bandwidth_slice_us %q: want a whole number of microseconds, 1 or more", s)
	}
	return v, nil
}

// KernelRelease returns uname -r.
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// Load1 returns the host's 1-minute load average from procRoot/loadavg,
// or -1 when unknown.
func Load1(procRoot string) float64 {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return -1
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return -1
	}
	return l.Load1
}

// Emulated reports whether the CPUs are emulated in software (qemu's TCG
// names its CPU model "QEMU TCG CPU ..." in procRoot/cpuinfo).
func Emulated(procRoot string) bool {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return false
	}
	cpus, err := fs.CPUInfo()
	if err != nil || len(cpus) == 0 {
		return false
	}
	return strings.Contains(cpus[0].ModelName, "TCG")
}
