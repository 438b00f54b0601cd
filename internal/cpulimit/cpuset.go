package cpulimit

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Bounds of a CPU list.
const (
	// MaxCPU is the highest CPU number a list may name: NR_CPUS is at
	// most 8192 on every architecture the kernel builds for today
	// (x86_64 CONFIG_MAXSMP), so CPUs are 0..8191.
	MaxCPU = 8191
	// MaxCPUListBytes bounds a list's text. The longest canonical list of
	// CPUs up to MaxCPU (every other CPU: "0,2,4,…,8190") is about 19.6
	// KiB.
	MaxCPUListBytes = 32 << 10
)

// cpuWords is the size of a CPU bitmap in 64-bit words.
const cpuWords = (MaxCPU + 1) / 64

// cpuListAccepted says what a CPU list may hold, for errors.
var cpuListAccepted = fmt.Sprintf(`comma-separated CPU numbers 0..%d and ranges LO-HI with LO <= HI, such as "0-3" or "0,2-3"`, MaxCPU)

// CPUSet is a set of CPUs by number, as the kernel writes one in a CPU
// list: cgroup v2 and v1 cpuset.cpus, /sys/devices/system/cpu/online,
// comma-separated numbers and inclusive ranges, "0-3,8,10-11". It is kept
// in canonical form (ascending, adjacent CPUs merged into ranges), so two
// sets are equal exactly when == says so. The zero CPUSet is empty; as a
// [Limit]'s CPUs it means the cgroup is not confined to a set.
type CPUSet struct {
	list string
	n    int
}

// ParseCPUSet reads a CPU list; surrounding white space (the kernel's
// newline) is ignored and an empty list is the empty set. It refuses a
// list longer than MaxCPUListBytes, a CPU above MaxCPU, a range that runs
// backwards and anything else that is not a CPU list (the kernel's
// "LO-HI:USED/GROUP" strides included: no cpuset file writes them), saying
// where in the list.
func ParseCPUSet(s string) (CPUSet, error) {
	if len(s) > MaxCPUListBytes {
		return CPUSet{}, &CPUListError{Problem: fmt.Sprintf("CPU list of %d bytes: longer than %d", len(s), MaxCPUListBytes)}
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return CPUSet{}, nil
	}
	var m [cpuWords]uint64
	at := 0
	for part := range strings.SplitSeq(t, ",") {
		lo, hi, err := parseCPURange(part)
		if err != nil {
			return CPUSet{}, &CPUListError{Problem: fmt.Sprintf("%s, byte %d: %v", quoteList(t), at, err)}
		}
		for c := lo; c <= hi; c++ {
			m[c/64] |= 1 << (c % 64)
		}
		at += len(part) + 1
	}
	return fromBits(&m), nil
}

// CPUListError is a CPU list [ParseCPUSet] refuses. Problem says what is
// wrong and where in the list; Error adds what a list may hold.
type CPUListError struct {
	Problem string
}

func (e *CPUListError) Error() string {
	return e.Problem + "; accepted: " + cpuListAccepted
}

// quoteList names a list in an error: quoted, or by its length when it is
// too long to read.
func quoteList(t string) string {
	if len(t) > 64 {
		return fmt.Sprintf("CPU list of %d bytes", len(t))
	}
	return fmt.Sprintf("CPU list %q", t)
}

// parseCPURange reads "N" or "LO-HI".
func parseCPURange(part string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(part, "-")
	if lo, err = parseCPU(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseCPU(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", part)
	}
	return lo, hi, nil
}

// parseCPU reads one CPU number: decimal digits, at most MaxCPU.
func parseCPU(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > MaxCPU {
		return 0, fmt.Errorf("CPU %s is above %d, the highest CPU number a kernel has", s, MaxCPU)
	}
	return int(n), nil
}

// FirstCPUs is the set of CPUs 0..n-1 (empty for n <= 0, at most
// MaxCPU+1 CPUs).
func FirstCPUs(n int) CPUSet {
	var m [cpuWords]uint64
	for c := range min(n, MaxCPU+1) {
		m[c/64] |= 1 << (c % 64)
	}
	return fromBits(&m)
}

// fromBits renders a bitmap in canonical form.
func fromBits(m *[cpuWords]uint64) CPUSet {
	var b strings.Builder
	n := 0
	for c := 0; c <= MaxCPU; c++ {
		if m[c/64] == 0 {
			c |= 63 // on to the next word: a bitmap is mostly empty words
			continue
		}
		if m[c/64]&(1<<(c%64)) == 0 {
			continue
		}
		hi := c
		for hi < MaxCPU && m[(hi+1)/64]&(1<<((hi+1)%64)) != 0 {
			hi++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
		if hi > c {
			b.WriteString("-" + strconv.Itoa(hi))
		}
		n += hi - c + 1
		c = hi
	}
	return CPUSet{list: b.String(), n: n}
}

// bits is s as a bitmap.
func (s CPUSet) bits() *[cpuWords]uint64 {
	var m [cpuWords]uint64
	if s.n == 0 {
		return &m
	}
	for part := range strings.SplitSeq(s.list, ",") {
		lo, hi, _ := parseCPURange(part) // canonical: always parses
		for c := lo; c <= hi; c++ {
			m[c/64] |= 1 << (c % 64)
		}
	}
	return &m
}

// String is the canonical CPU list, "" for the empty set: what cpuset.cpus
// reads back after it is written.
func (s CPUSet) String() string { return s.list }

// Count is the number of CPUs in s.
func (s CPUSet) Count() int { return s.n }

// IsEmpty reports whether s has no CPU.
func (s CPUSet) IsEmpty() bool { return s.n == 0 }

// Contains reports whether CPU cpu is in s.
func (s CPUSet) Contains(cpu int) bool {
	return cpu >= 0 && cpu <= MaxCPU && s.bits()[cpu/64]&(1<<(cpu%64)) != 0
}

// CPUs lists the CPUs of s, ascending.
func (s CPUSet) CPUs() []int {
	out := make([]int, 0, s.n)
	m := s.bits()
	for w, word := range m {
		for word != 0 {
			out = append(out, w*64+bits.TrailingZeros64(word))
			word &= word - 1
		}
	}
	return out
}

// An empty operand decides Union, Intersect and Minus without a bitmap:
// most pools set no CPUS, and a plan checks every pool's against the
// node's online CPUs.

// Union is the CPUs in s or o.
func (s CPUSet) Union(o CPUSet) CPUSet {
	switch {
	case s.n == 0:
		return o
	case o.n == 0:
		return s
	}
	return s.combine(o, func(a, b uint64) uint64 { return a | b })
}

// Intersect is the CPUs in both s and o.
func (s CPUSet) Intersect(o CPUSet) CPUSet {
	if s.n == 0 || o.n == 0 {
		return CPUSet{}
	}
	return s.combine(o, func(a, b uint64) uint64 { return a & b })
}

// Minus is the CPUs in s and not in o.
func (s CPUSet) Minus(o CPUSet) CPUSet {
	if s.n == 0 || o.n == 0 {
		return s
	}
	return s.combine(o, func(a, b uint64) uint64 { return a &^ b })
}

// SubsetOf reports whether every CPU of s is in o.
func (s CPUSet) SubsetOf(o CPUSet) bool { return s.Minus(o).IsEmpty() }

func (s CPUSet) combine(o CPUSet, op func(a, b uint64) uint64) CPUSet {
	a, b := s.bits(), o.bits()
	for i := range a {
		a[i] = op(a[i], b[i])
	}
	return fromBits(a)
}
