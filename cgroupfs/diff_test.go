package cgroupfs

import (
	"math"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// TestDiff checks the pure decision on literal trees: what is read is
// spelled out, and so is every op, in order.
func TestDiff(t *testing.T) {
	v2Roots := map[string]string{HierUnified: "/cg/pa"}
	v1Roots := map[string]string{HierCPU: "/cpu/pa", HierCPUAcct: "/acct/pa"}
	lim := func(quota, period, burst, weight int64) cpulimit.Limit {
		return cpulimit.Limit{QuotaUsec: quota, PeriodUsec: period, BurstUsec: burst, Weight: weight}
	}
	cg := func(l cpulimit.Limit) planner.Cgroup { return planner.Cgroup{CPU: l, MemoryBytes: -1} }
	val := func(l cpulimit.Limit) settings { return settings{cpu: l, shares: l.Shares(), memBytes: -1} }
	unlimited := lim(-1, 100000, 0, 100)
	desired := func(pools ...*planner.PoolState) planner.Desired {
		return planner.Desired{Pools: append([]*planner.PoolState{{Name: "default", Pool: cg(unlimited), Query: cg(unlimited)}}, pools...)}
	}
	pool := func(name string, p, q cpulimit.Limit) *planner.PoolState {
		return &planner.PoolState{Name: name, Pool: cg(p), Query: cg(q)}
	}
	in := func(hiers ...string) *node {
		n := &node{in: map[string]bool{}, procs: map[string][]int{}}
		for _, h := range hiers {
			n.in[h] = true
		}
		return n
	}
	busy := func(n *node, h string, pids ...int) *node { n.procs[h] = pids; return n }
	tree := func(v2 bool, nodes map[string]*node, values map[string]settings) *current {
		c := &current{v2: v2, pageSize: 4096, roots: v2Roots, hiers: []string{HierUnified}, rootIn: map[string]bool{HierUnified: true},
			nodes: nodes, values: values, enabled: map[string][]string{".": {"cpu"}}, rootHi: math.MaxUint64}
		if !v2 {
			c.roots, c.hiers, c.rootIn, c.enabled = v1Roots, []string{HierCPU, HierCPUAcct}, map[string]bool{HierCPU: true, HierCPUAcct: true}, nil
		}
		for p := range nodes {
			if !strings.Contains(p, "/") && v2 {
				c.enabled[p] = []string{"cpu"}
			}
		}
		return c
	}
	olap := lim(700000, 100000, 0, 100)
	olapQ := lim(350000, 100000, 0, 100)
	tests := []struct {
		name string
		cur  *current
		d    planner.Desired
		want []string
	}{
		{
			name: "nothing there yet (v2)",
			cur: &current{v2: true, pageSize: 4096, roots: v2Roots, hiers: []string{HierUnified}, rootIn: map[string]bool{},
				nodes: map[string]*node{}, values: map[string]settings{}, enabled: map[string][]string{}, rootHi: math.MaxUint64},
			d: desired(pool("olap", olap, olapQ)),
			want: []string{
				"mkdir /cg/pa",
				`write "+cpu" to /cg/pa/cgroup.subtree_control`,
				"mkdir /cg/pa/default",
				`write "+cpu" to /cg/pa/default/cgroup.subtree_control`,
				"mkdir /cg/pa/olap",
				`write "+cpu" to /cg/pa/olap/cgroup.subtree_control`,
				`write "700000 100000" to /cg/pa/olap/cpu.max`,
			},
		},
		{
			name: "as desired: nothing to do",
			cur: tree(true, map[string]*node{"default": in(HierUnified), "olap": in(HierUnified), "olap/q1": busy(in(HierUnified), HierUnified, 7)},
				map[string]settings{"default": val(unlimited), "olap": val(olap), "olap/q1": val(olapQ)}),
			d: desired(pool("olap", olap, olapQ)),
		},
		{
			name: "tighten the pool's busy query first, loosen another pool after",
			cur: tree(true, map[string]*node{"default": in(HierUnified), "olap": in(HierUnified), "olap/q1": busy(in(HierUnified), HierUnified, 7), "etl": in(HierUnified)},
				map[string]settings{"default": val(unlimited), "olap": val(olap), "olap/q1": val(olapQ), "etl": val(lim(100000, 100000, 0, 100))}),
			d: desired(pool("etl", lim(200000, 100000, 0, 100), unlimited), pool("olap", lim(300000, 100000, 0, 200), lim(150000, 100000, 0, 100))),
			want: []string{
				`write "150000 100000" to /cg/pa/olap/q1/cpu.max`,
				`write "300000 100000" to /cg/pa/olap/cpu.max`,
				`write "200" to /cg/pa/olap/cpu.weight`,
				`write "200000 100000" to /cg/pa/etl/cpu.max`,
			},
		},
		{
			name: "a burst is written before its quota, again after it if refused",
			cur: tree(true, map[string]*node{"default": in(HierUnified), "olap": in(HierUnified)},
				map[string]settings{"default": val(unlimited), "olap": val(lim(20000, 100000, 10000, 100))}),
			d: desired(pool("olap", lim(80000, 100000, 60000, 100), olapQ)),
			want: []string{
				`write "60000" to /cg/pa/olap/cpu.max.burst (again after the quota if refused)`,
				`write "80000 100000" to /cg/pa/olap/cpu.max`,
			},
		},
		{
			name: "an empty query cgroup goes before values, a dropped pool's processes move to default",
			cur: tree(true, map[string]*node{"default": in(HierUnified), "olap": in(HierUnified), "olap/idle": in(HierUnified),
				"etl": in(HierUnified), "etl/q2": busy(in(HierUnified), HierUnified, 8, 9)},
				map[string]settings{"default": val(unlimited), "olap": val(olap), "olap/idle": val(olapQ)}),
			d: desired(pool("olap", olap, olapQ)),
			want: []string{
				"mkdir /cg/pa/default/etl.q2",
				"rmdir /cg/pa/olap/idle",
				"move pids [8 9] from /cg/pa/etl/q2 to /cg/pa/default/etl.q2",
				"rmdir /cg/pa/etl/q2",
				"rmdir /cg/pa/etl",
			},
		},
		{
			name: "an empty query cgroup its owner keeps stays (its accounting not read yet)",
			cur: func() *current {
				c := tree(true, map[string]*node{"default": in(HierUnified), "olap": in(HierUnified), "olap/ending": in(HierUnified)},
					map[string]settings{"default": val(unlimited), "olap": val(olap), "olap/ending": val(olapQ)})
				c.keep = map[string]bool{"olap/ending": true}
				return c
			}(),
			d:    desired(pool("olap", olap, olapQ)),
			want: nil,
		},
		{
			// runc and crun write every available controller into the
			// cgroup.subtree_control of a container's ancestors, and the
			// container's cgroup is a leaf below its query's
			// (internal/oci): controllers poolagent did not enable, and a
			// cgroup it did not make, are left as they are.
			name: "a container's leaf below its query, every controller enabled by its runtime: nothing to do",
			cur: func() *current {
				c := tree(true, map[string]*node{"default": in(HierUnified), "olap": in(HierUnified), "olap/q1": in(HierUnified),
					"olap/q1/container": busy(in(HierUnified), HierUnified, 7)},
					map[string]settings{"default": val(unlimited), "olap": val(olap), "olap/q1": val(olapQ)})
				all := []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}
				for _, cg := range []string{".", "olap", "olap/q1"} {
					c.enabled[cg] = all
				}
				return c
			}(),
			d: desired(pool("olap", olap, olapQ)),
		},
		{
			name: "v1: a pool's period first when its quota first would put it below its query; the query's quota first",
			cur: tree(false, map[string]*node{"default": in(HierCPU, HierCPUAcct), "olap": in(HierCPU, HierCPUAcct), "olap/q1": busy(in(HierCPU, HierCPUAcct), HierCPU, 7)},
				map[string]settings{"default": val(unlimited), "olap": val(lim(200000, 100000, 0, 100)), "olap/q1": val(lim(200000, 100000, 0, 100))}),
			d: desired(pool("olap", lim(100000, 50000, 0, 100), lim(100000, 50000, 0, 100))),
			want: []string{
				`write "50000" to /cpu/pa/olap/cpu.cfs_period_us`,
				`write "100000" to /cpu/pa/olap/cpu.cfs_quota_us`,
				`write "100000" to /cpu/pa/olap/q1/cpu.cfs_quota_us`,
				`write "50000" to /cpu/pa/olap/q1/cpu.cfs_period_us`,
			},
		},
		{
			name: "v1: the quota lifted in between when neither order fits between the root's bound and the query",
			cur: func() *current {
				c := tree(false, map[string]*node{"default": in(HierCPU, HierCPUAcct), "olap": in(HierCPU, HierCPUAcct), "olap/q1": busy(in(HierCPU, HierCPUAcct), HierCPU, 7)},
					map[string]settings{"default": val(unlimited), "olap": val(lim(150000, 100000, 0, 100)), "olap/q1": val(lim(100000, 100000, 0, 100))})
				c.rootHi = 2 << 20 // an ancestor limited to 2 CPUs
				return c
			}(),
			d: desired(pool("olap", lim(390000, 200000, 0, 100), lim(100000, 100000, 0, 100))),
			want: []string{
				`write "-1" to /cpu/pa/olap/cpu.cfs_quota_us`,
				`write "200000" to /cpu/pa/olap/cpu.cfs_period_us`,
				`write "390000" to /cpu/pa/olap/cpu.cfs_quota_us`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, o := range diff(tt.cur, tt.d) {
				got = append(got, o.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("ops:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
