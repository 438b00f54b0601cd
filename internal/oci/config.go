package oci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/poolagent/poolagent/internal/client"
)

// Annotations of a container's config.json that poolagent reads or
// writes; any other key beginning with AnnotationPrefix is refused, so a
// misspelt pool annotation does not quietly send the container to the
// default pool.
const (
	AnnotationPrefix = "io.poolagent."
	// AnnotationPool names the container's pool.
	AnnotationPool = "io.poolagent.pool"
	// AnnotationQuery is written by poolagent-oci: the container's query,
	// "pool/query", as `poolagent queries` lists it.
	AnnotationQuery = "io.poolagent.query"
)

// nameAnnotations hold a container's name, as engines set it, in the
// order they are looked up: containerd's CRI plugin (Kubernetes), CRI-O
// and dockershim, nerdctl. Without one, the container's id stands as its
// name.
var nameAnnotations = []string{"io.kubernetes.cri.container-name", "io.kubernetes.container.name", "nerdctl/name"}

// LeafName is the name of the container's cgroup below its query cgroup:
// one container per query, so one fixed name, which no interface file of
// the kernel's can have.
const LeafName = "container"

// MaxConfigBytes is the largest config.json read: 16 MiB, far above any
// engine's (a few KiB, more with many mounts).
const MaxConfigBytes = 16 << 20

// MaxPoolNameBytes bounds the pool annotation's value; the daemon checks
// the name against its pools.
const MaxPoolNameBytes = 255

// ReadConfig reads a bundle's config file with the runtime-spec types.
// The error names the file and says what is wrong.
func ReadConfig(file string) (*specs.Spec, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read the container's config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the container's config %s: %w", file, err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("container config %s is over %d bytes", file, MaxConfigBytes)
	}
	return ParseConfig(file, b)
}

// ParseConfig decodes config.json b (named file in errors): one JSON
// object of the runtime-spec's types, nothing after it.
func ParseConfig(file string, b []byte) (*specs.Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var s specs.Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("container config %s is not an OCI runtime config (config.json): %s", file, describeJSON(b, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("container config %s: more after its JSON object at byte %d", file, dec.InputOffset())
	}
	if s.Version == "" {
		return nil, fmt.Errorf("container config %s has no ociVersion: not an OCI runtime config", file)
	}
	return &s, nil
}

// describeJSON says where a decode error is, as line:column of b.
func describeJSON(b []byte, err error) string {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(b))
		err = errors.New("the file ends before its JSON does")
	}
	if off < 0 || off > int64(len(b)) {
		return err.Error()
	}
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

// Request is what a container asks of the daemon: its pool ("" to let
// the classifiers choose) and the application name classifiers match
// with HAS_APP_NAME.
type Request struct {
	Pool, App string
}

// RequestOf reads the container's pool from its io.poolagent.pool
// annotation and its name from the engines' annotations (the id when none
// has one). An unknown io.poolagent.* annotation, one poolagent-oci
// writes, or a pool name that no pool can have is refused.
func RequestOf(s *specs.Spec, id string) (Request, error) {
	r := Request{App: id}
	for _, k := range slices.Sorted(maps.Keys(s.Annotations)) {
		if !strings.HasPrefix(k, AnnotationPrefix) {
			continue
		}
		if k != AnnotationPool {
			return r, fmt.Errorf("container %s: unknown annotation %s=%q: the one poolagent reads is %s=POOL (%s is written by poolagent-oci)",
				id, k, s.Annotations[k], AnnotationPool, AnnotationQuery)
		}
	}
	if v, ok := s.Annotations[AnnotationPool]; ok {
		if err := checkPoolName(v); err != nil {
			return r, fmt.Errorf("container %s: annotation %s=%q: %w", id, AnnotationPool, v, err)
		}
		r.Pool = v
	}
	for _, k := range nameAnnotations {
		if v := s.Annotations[k]; v != "" {
			r.App = v
			break
		}
	}
	return r, nil
}

// checkPoolName refuses what no pool name can be: empty, over
// MaxPoolNameBytes, or with a slash, a space or a control character.
// Whether the pool exists is the daemon's to say.
func checkPoolName(v string) error {
	switch {
	case v == "":
		return errors.New("the pool name is empty: give a pool's name, as `poolagent pools` lists them")
	case len(v) > MaxPoolNameBytes:
		return fmt.Errorf("the pool name is %d bytes long: at most %d", len(v), MaxPoolNameBytes)
	}
	for _, c := range v {
		if c == '/' || unicode.IsSpace(c) || unicode.IsControl(c) {
			return fmt.Errorf("a pool name has no %q: give a pool's name, as `poolagent pools` lists them", c)
		}
	}
	return nil
}

// Limits are a query cgroup's limits as its files hold them, copied to
// the container's own cgroup so that the container sees them.
type Limits struct {
	// QuotaUsec and PeriodUsec are cpu.max ("max 100000": QuotaUsec -1);
	// BurstUsec is cpu.max.burst (0: none).
	QuotaUsec  int64
	PeriodUsec uint64
	BurstUsec  uint64
	// MemoryBytes is memory.max (-1: "max", or no memory controller).
	MemoryBytes int64
}

// Placed is where the daemon placed the container's query.
type Placed struct {
	// Cgroup is the query cgroup ("/"-rooted, below the cgroup2 mount).
	Cgroup string
	// Pool and Query name the query.
	Pool, Query string
	// CPULimit is the query's CPU cap in vCPUs when admitted.
	CPULimit float64
	// Limits are the query cgroup's limits.
	Limits Limits
}

// Rewrite places the container of s below its query's cgroup: its
// linux.cgroupsPath becomes a leaf (LeafName) of the query cgroup; the
// query's CPU and memory limits are copied into linux.resources where the
// container asked for none or for more (the burst, which runc 1.1
// ignores in linux.resources.cpu, as unified's cpu.max.burst); its
// process is told its CPU cap (client.EnvCPULimit); and the query is
// named in the AnnotationQuery annotation.
func Rewrite(s *specs.Spec, p Placed) {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	s.Linux.CgroupsPath = path.Join(p.Cgroup, LeafName)
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
	res := s.Linux.Resources
	l := p.Limits
	if l.QuotaUsec > 0 && l.PeriodUsec > 0 {
		if res.CPU == nil {
			res.CPU = &specs.LinuxCPU{}
		}
		c := res.CPU
		if c.Quota == nil || *c.Quota <= 0 || c.Period == nil || *c.Period == 0 ||
			float64(*c.Quota)/float64(*c.Period) > float64(l.QuotaUsec)/float64(l.PeriodUsec) {
			q, per := l.QuotaUsec, l.PeriodUsec
			c.Quota, c.Period = &q, &per
		}
		if l.BurstUsec > 0 && c.Burst == nil {
			if _, set := res.Unified["cpu.max.burst"]; !set {
				if res.Unified == nil {
					res.Unified = map[string]string{}
				}
				res.Unified["cpu.max.burst"] = strconv.FormatUint(l.BurstUsec, 10)
			}
		}
	}
	if l.MemoryBytes > 0 {
		if res.Memory == nil {
			res.Memory = &specs.LinuxMemory{}
		}
		if m := res.Memory; m.Limit == nil || *m.Limit <= 0 || *m.Limit > l.MemoryBytes {
			b := l.MemoryBytes
			m.Limit = &b
			// runc refuses a swap limit below the memory limit; a lower
			// memory limit leaves a higher one valid.
		}
	}
	if s.Process != nil {
		s.Process.Env = setEnv(s.Process.Env, client.EnvCPULimit, strconv.FormatFloat(p.CPULimit, 'f', -1, 64))
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationQuery] = p.Pool + "/" + p.Query
}

// setEnv sets key=value in env, in place of an earlier value.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k != key {
			out = append(out, e)
		}
	}
	return append(out, key+"="+value)
}

// WriteConfig replaces file with s, atomically: a file beside it,
// renamed over it, with file's permissions.
func WriteConfig(file string, s *specs.Spec) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the container's config: %w", err)
	}
	mode := os.FileMode(0o600)
	if st, err := os.Stat(file); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".config.json.poolagent-*")
	if err != nil {
		return fmt.Errorf("rewrite the container's config: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	err = errors.Join(err, tmp.Chmod(mode), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("rewrite the container's config %s: %w", file, err)
	}
	return nil
}
