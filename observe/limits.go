package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// noMemoryLimit is where cgroup v1 memory.limit_in_bytes reads as
// unlimited: the kernel reports PAGE_COUNTER_MAX pages in bytes
// (9223372036854771712 with 4 KiB pages), never a real limit.
const noMemoryLimit = 1 << 62

// ParseMemoryLimit reads cgroup v2 memory.max ("max" or bytes) or v1
// memory.limit_in_bytes (bytes) as bytes; -1 when unlimited.
func ParseMemoryLimit(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "max" {
		return -1, nil
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory limit %q: want \"max\" or bytes", t)
	}
	if v >= noMemoryLimit {
		return -1, nil
	}
	return int64(v), nil
}
