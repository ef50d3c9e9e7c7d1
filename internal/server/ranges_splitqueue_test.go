package server

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/slot"
)

// TestChooseSplitSlot: the split slot halves the range by the per-slot
// sizes, within the probe budget, never cuts a slot, and a range of one
// slot cannot split.
func TestChooseSplitSlot(t *testing.T) {
	// sizer returns size over per-slot byte counts (slot start+i holds
	// per[i]) and counts its calls.
	sizer := func(start uint16, per []uint64, calls *int) func(lo, hi uint16) (uint64, bool) {
		return func(lo, hi uint16) (uint64, bool) {
			*calls++
			if lo < start || int(hi) > int(start)+len(per) || lo > hi {
				t.Fatalf("size(%d, %d) outside the range [%d, %d)", lo, hi, start, int(start)+len(per))
			}
			var sum uint64
			for s := lo; s < hi; s++ {
				sum += per[s-start]
			}
			return sum, true
		}
	}
	uniform := func(n int) []uint64 {
		per := make([]uint64, n)
		for i := range per {
			per[i] = 100
		}
		return per
	}
	for _, c := range []struct {
		name       string
		start      uint16
		per        []uint64
		want       []uint16 // acceptable answers
		unsplittab bool
	}{
		{name: "one slot", start: 7, per: []uint64{1 << 30}, unsplittab: true},
		{name: "one slot at the end", start: 16383, per: []uint64{5}, unsplittab: true},
		{name: "two slots", start: 10, per: []uint64{1, 1000}, want: []uint16{11}},
		{name: "uniform full range", start: 0, per: uniform(16384), want: []uint16{8192}},
		{name: "uniform odd", start: 100, per: uniform(11), want: []uint16{105, 106}},
		{name: "empty: middle", start: 0, per: make([]uint64, 1000), want: []uint16{500}},
		{name: "all in one slot", start: 0, per: func() []uint64 { p := make([]uint64, 100); p[50] = 1 << 20; return p }(), want: []uint16{50, 51}},
		{name: "all in the first slot", start: 0, per: func() []uint64 { p := make([]uint64, 100); p[0] = 1 << 20; return p }(), want: []uint16{1}},
		{name: "all in the last slot", start: 0, per: func() []uint64 { p := make([]uint64, 100); p[99] = 1 << 20; return p }(), want: []uint16{99}},
		{name: "skewed", start: 0, per: func() []uint64 {
			p := uniform(16384)
			for i := 12000; i < 12100; i++ {
				p[i] = 1 << 20 // most bytes in slots [12000, 12100)
			}
			return p
		}(), want: []uint16{12049, 12050, 12051}},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			sl, ok := chooseSplitSlot(c.start, c.start+uint16(len(c.per)), splitQueueProbes, sizer(c.start, c.per, &calls))
			if c.unsplittab {
				if ok {
					t.Fatalf("a single slot splits at %d", sl)
				}
				return
			}
			if !ok {
				t.Fatal("no split slot")
			}
			if sl <= c.start || int(sl) >= int(c.start)+len(c.per) {
				t.Fatalf("split slot %d not strictly inside [%d, %d)", sl, c.start, int(c.start)+len(c.per))
			}
			found := false
			for _, w := range c.want {
				found = found || sl == w
			}
			if !found {
				t.Fatalf("split slot %d, want one of %v", sl, c.want)
			}
			if calls > splitQueueProbes {
				t.Fatalf("%d size estimates, want at most %d", calls, splitQueueProbes)
			}
		})
	}
	// Out of probes: a boundary inside, after at most probes estimates.
	calls := 0
	sl, ok := chooseSplitSlot(0, 16384, 3, sizer(0, uniform(16384), &calls))
	if !ok || sl == 0 || calls > 3 {
		t.Fatalf("3 probes: slot %d, %v after %d estimates", sl, ok, calls)
	}
	// Without estimates: the middle slot.
	sl, ok = chooseSplitSlot(0, 100, splitQueueProbes, func(lo, hi uint16) (uint64, bool) { return 0, false })
	if !ok || sl != 50 {
		t.Fatalf("no estimates: %d, %v; want the middle, 50", sl, ok)
	}
}

// splitQueueCluster starts 3 nodes with the split queue at size (0: off),
// looking every 50ms, writes about 3 MiB of incompressible values over
// 1500 keys (named by keyFormat with the key's number) and flushes every node's memtables (the queue's estimate
// counts flushed data only: ranges_splitqueue.go). It returns the
// cluster and the values written.
func splitQueueCluster(t *testing.T, size int64, keyFormat string) (*testCluster, map[string]string) {
	t.Helper()
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) {
		cfg.RangeSplitSize = size
		cfg.testAnyRangeSplitSize = true
		cfg.testSplitQueueEvery = 50 * time.Millisecond
	})
	ctx := testCtx(t, time.Minute)
	cl := c.client(1)
	vals := map[string]string{}
	buf := make([]byte, 1024)
	for batch := 0; batch < 15; batch++ {
		pipe := cl.Pipeline()
		for i := 0; i < 100; i++ {
			k := fmt.Sprintf(keyFormat, batch*100+i)
			rand.Read(buf)
			v := fmt.Sprintf("%x", buf) // 2 KiB
			vals[k] = v
			pipe.Set(ctx, k, v, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		if err := c.node(id).db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return c, vals
}

// rangesOf is node id's ranges as "id:[start,end)" strings, in id order.
func rangesOf(c *testCluster, id uint64) []string {
	var out []string
	for _, r := range c.node(id).Ranges().Ranges {
		out = append(out, fmt.Sprintf("%d:[%d,%d)", r.RangeID, r.StartSlot, r.EndSlot))
	}
	return out
}

// splitsBySize is kvorum_range_splits_total{reason="size"} as node n's
// metrics registry exports it (-1: not exported).
func splitsBySize(t *testing.T, n *Node) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kvorum_range_splits_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "size" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// TestSplitQueueSplitsBySize: with --range-split-size 1 MiB, a range
// holding about 3 MiB splits by itself (no split by hand) into at least
// two ranges, which every node ends up holding alike; every key reads
// back from every node, each range the queue left is at most the limit
// or a single slot, and the splits are counted in
// kvorum_range_splits_total{reason="size"}.
func TestSplitQueueSplitsBySize(t *testing.T) {
	const limit = 1 << 20
	c, vals := splitQueueCluster(t, limit, "key:%d")
	ctx := testCtx(t, 2*time.Minute)

	// Until every node holds the same ranges, at least 2, for 1s (the
	// queue keeps splitting while a range is over the limit).
	deadline := time.Now().Add(45 * time.Second)
	var prev string
	stableSince := time.Now()
	for {
		a := rangesOf(c, 1)
		same := len(a) >= 2
		for id := uint64(2); id <= 3 && same; id++ {
			same = strings.Join(rangesOf(c, id), " ") == strings.Join(a, " ")
		}
		cur := strings.Join(a, " ")
		if !same || cur != prev {
			prev, stableSince = cur, time.Now()
		} else if time.Since(stableSince) > time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stable split by size: node 1 holds %v, node 2 %v, node 3 %v", rangesOf(c, 1), rangesOf(c, 2), rangesOf(c, 3))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("ranges after the split queue: %s", prev)

	var total float64
	for id := uint64(1); id <= 3; id++ {
		v := splitsBySize(t, c.node(id))
		if v < 0 {
			t.Fatalf("node %d does not export kvorum_range_splits_total{reason=\"size\"}", id)
		}
		total += v
	}
	if n := len(c.node(1).Ranges().Ranges); total != float64(n-1) {
		t.Fatalf("kvorum_range_splits_total{reason=\"size\"} sums to %v over the nodes; %d ranges come from %d splits", total, n, n-1)
	}
	// What the queue left: each range at most the limit (estimated on its
	// leader) or one slot.
	for id := uint64(1); id <= 3; id++ {
		n := c.node(id)
		for _, r := range n.Ranges().Ranges {
			if r.Role != "leader" {
				continue
			}
			if r.ApproximateBytes > limit && r.EndSlot-r.StartSlot > 1 {
				t.Errorf("range %d [%d, %d) holds %d bytes > %d and was not split", r.RangeID, r.StartSlot, r.EndSlot, r.ApproximateBytes, limit)
			}
		}
	}

	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		pipe := cl.Pipeline()
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
			pipe.Get(ctx, k)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		for i, cmd := range cmds {
			if got := cmd.(interface{ Val() string }).Val(); got != vals[keys[i]] {
				t.Fatalf("node %d: GET %s = %.20q..., want %.20q...", id, keys[i], got, vals[keys[i]])
			}
		}
	}
	// Every range takes writes.
	for i := 0; i < 100; i++ {
		if err := c.client(uint64(i%3+1)).Set(ctx, fmt.Sprintf("after:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplitQueueSingleSlot: when every key shares one hash tag, the
// queue isolates that slot in a range of its own (at most two splits from
// the full range) and then reports it as unsplittable: the
// kvorum_range_unsplittable gauge is 1 and kvorum_range_unsplittable_total
// counts it once however many rounds see it, on the range's leader.
func TestSplitQueueSingleSlot(t *testing.T) {
	c, _ := splitQueueCluster(t, 1<<20, "{tag}:%d")
	hot := uint32(slot.Of([]byte("{tag}")))
	deadline := time.Now().Add(45 * time.Second)
	for {
		var lead *Node
		for id := uint64(1); id <= 3; id++ {
			for _, r := range c.node(id).Ranges().Ranges {
				if r.Role == "leader" && r.StartSlot == hot && r.EndSlot == hot+1 {
					lead = c.node(id)
				}
			}
		}
		if lead != nil && gather(t, lead, "kvorum_range_unsplittable") == 1 {
			time.Sleep(300 * time.Millisecond) // more rounds: counted once still
			if v := gather(t, lead, "kvorum_range_unsplittable_total"); v != 1 {
				t.Fatalf("kvorum_range_unsplittable_total = %v, want 1", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %d not isolated and reported: node 1 holds %v", hot, rangesOf(c, 1))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(c.node(1).Ranges().Ranges); n > 3 {
		t.Fatalf("%d ranges (%v): isolating one slot takes at most two splits", n, rangesOf(c, 1))
	}
}

// gather is the value of the unlabelled gauge or counter name in node n's
// registry (-1: not exported).
func gather(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// TestSplitQueueOff: with RangeSplitSize 0 (the default) the same data
// never splits the range, and the counter stays at 0.
func TestSplitQueueOff(t *testing.T) {
	c, _ := splitQueueCluster(t, 0, "key:%d")
	time.Sleep(time.Second) // 20 rounds, had the queue been on
	for id := uint64(1); id <= 3; id++ {
		rs := c.node(id).Ranges().Ranges
		if len(rs) != 1 {
			t.Fatalf("node %d holds %v with the split queue off", id, rangesOf(c, id))
		}
		if rs[0].ApproximateBytes < 1<<20 && rs[0].Role == "leader" {
			t.Fatalf("the range holds only %d bytes: the test would not have split it either", rs[0].ApproximateBytes)
		}
		if v := splitsBySize(t, c.node(id)); v != 0 {
			t.Fatalf("node %d: kvorum_range_splits_total{reason=\"size\"} = %v", id, v)
		}
	}
}

// TestRangeSplitSizeValidate: a negative RangeSplitSize and one below
// MinRangeSplitSize are refused; 0 and the minimum are accepted.
func TestRangeSplitSizeValidate(t *testing.T) {
	for _, c := range []struct {
		size int64
		ok   bool
	}{{0, true}, {-1, false}, {1, false}, {MinRangeSplitSize - 1, false}, {MinRangeSplitSize, true}, {96 << 20, true}} {
		cfg := Config{DataDir: "/d", RangeSplitSize: c.size}
		cfg.EnsureDefaults()
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("RangeSplitSize %d: Validate = %v, want ok %v", c.size, err, c.ok)
		}
	}
	cfg := Config{DataDir: "/d", RangeSplitSize: 4096, testAnyRangeSplitSize: true}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("test override: %v", err)
	}
}
